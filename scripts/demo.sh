#!/usr/bin/env bash
# The README's main-job command: installs what is missing, builds the engine,
# core.wasm and the package (dist/), then runs the verification stampede on
# local workerd (verify/local/run.mjs): several consumer Workers share one
# limiter Worker against a fake upstream with its own quota, and the run ends
# with its report. Extra flags pass through (--faults, --load, --via=direct).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/bootstrap.sh
bash scripts/build.sh >/dev/null
node verify/local/run.mjs "$@"
