// Locates the built artifacts the Node tests exercise.
import { readFileSync, existsSync } from 'node:fs';
import { resolve } from 'node:path';
import { instantiateCore, type Core } from '../../shim/engine/loader.ts';

const root = resolve(import.meta.dirname, '../..');

export const WASM_PATH = process.env.DRL_WASM ?? resolve(root, 'build-wasm/core.wasm');
export const REPLAY_PATH = process.env.DRL_REPLAY ?? resolve(root, 'build/drl_replay');

export function compileCore(): WebAssembly.Module {
  if (!existsSync(WASM_PATH)) throw new Error(`${WASM_PATH} is missing: run npm run build:wasm first`);
  return new WebAssembly.Module(readFileSync(WASM_PATH));
}

export function loadCore(): Core {
  return instantiateCore(compileCore());
}
