#!/usr/bin/env bash
# The README's main-job command: installs what is missing, builds core.wasm
# and the loader, then replays a shared-quota workload against the engine.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/bootstrap.sh
bash scripts/build.sh >/dev/null
node scripts/demo.mjs
