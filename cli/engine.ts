/**
 * The engine the object runs, loaded in Node so the CLI checks a limits file
 * by the object's own rules before anything is uploaded.
 */
import { readFileSync } from 'node:fs';
import { instantiateCore, type Core } from '../shim/engine/loader.ts';

/**
 * Compiles core.wasm, by default the copy beside the bundled CLI
 * (dist/core.wasm next to dist/cli.js).
 *
 * @example
 * const core = loadCore();
 * const engine = core.createEngine();
 */
export function loadCore(wasm: string | URL = new URL('./core.wasm', import.meta.url)): Core {
  return instantiateCore(new WebAssembly.Module(readFileSync(wasm)));
}
