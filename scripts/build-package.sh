#!/usr/bin/env bash
# Builds what the npm package ships: dist/ (ESM + .d.ts from shim/) and
# dist/core.wasm. Brings core.wasm up to date first. Run by prepack.
set -euo pipefail
cd "$(dirname "$0")/.."
# Always the incremental build, so a pack never ships an engine older than
# core/: a no-op when nothing changed. Configured only the first time.
if [ ! -f build-wasm/CMakeCache.txt ]; then
  emcmake cmake -S . -B build-wasm >/dev/null
fi
cmake --build build-wasm -j2 >/dev/null
# The object imports ../core.wasm: beside the sources for the workerd tests,
# beside the compiled files in dist/ for the package.
cp build-wasm/core.wasm shim/core.wasm
# The dashboard page (shim/do/dashboard-page.ts): its script and style
# inlined, the CSP hashes computed from them.
node scripts/gen-dashboard.mjs
rm -rf dist
node_modules/.bin/tsc -p tsconfig.build.json
cp build-wasm/core.wasm dist/core.wasm
# /testing's module list for miniflare, from the import graph tsc just emitted.
node scripts/gen-contracts.mjs --dist dist
# The CLI (the package's bin), bundled with its libraries so the package has no runtime dependencies.
npm run --silent build:cli
