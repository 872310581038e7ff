// Extracts the fixture once, before the test files start in parallel (each
// then finds it in place): see fixturePackage in harness.ts.
import { fixturePackage } from './harness.ts';

export default function setup(): void {
  fixturePackage();
}
