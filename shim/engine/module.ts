/**
 * The compiled engine, imported as a module (wrangler's CompiledWasm rule):
 * workerd refuses to compile wasm at runtime. The build copies core.wasm to
 * shim/core.wasm for the sources and dist/core.wasm for the package.
 */
import coreWasm from '../core.wasm';
import { instantiateCore, type Core } from './loader.ts';

/** A fresh engine instance; each object owns one, so its memory goes with it. */
export function createCore(): Core {
  return instantiateCore(coreWasm);
}
