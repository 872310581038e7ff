#!/usr/bin/env bash
# Builds the native engine (tests, replay tool, benchmark), core.wasm and the
# JS loader. Incremental: reruns cost seconds.
set -euo pipefail
cd "$(dirname "$0")/.."

cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j2 2>&1 | grep -Ev '^\[|^Consolidate|^Scanning' || true
test -x build/drl_tests

emcmake cmake -S . -B build-wasm >/dev/null 2>&1 || emcmake cmake -S . -B build-wasm
cmake --build build-wasm -j2 2>&1 | grep -Ev '^\[|^Consolidate|^Scanning' || true
test -f build-wasm/core.wasm

bash scripts/build-package.sh
