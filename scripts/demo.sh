#!/usr/bin/env bash
# The README's main-job command: installs only what the demonstration needs
# (scripts/bootstrap.sh demo), builds core.wasm and the package (dist/), then
# runs the verification stampede on local workerd (verify/local/run.mjs):
# several consumer Workers share one limiter Worker against a fake upstream
# with its own quota, and the run ends with its report. Extra flags pass
# through (--faults, --load, --via=direct).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/bootstrap.sh demo
bash scripts/build-package.sh >/dev/null
node verify/local/run.mjs "$@"
