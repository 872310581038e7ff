#!/usr/bin/env bash
# Tests the package as a user receives it: npm pack, install the tarball into
# test/consumer (an application Worker), then
#   - typecheck every subpath under moduleResolution bundler, nodenext, node
#   - typecheck the consumer app against the installed .d.ts, and its
#     vitest.config.ts against @cloudflare/vitest-pool-workers as installed
#   - publint and arethetypeswrong on the tarball
#   - the consumer's own vitest-pool-workers suite (limiter as an auxiliary
#     Worker loaded from node_modules through miniflareLimiterWorker)
# Prints "consumer: N passed, N failed" for scripts/test.sh to add up.
set -uo pipefail
cd "$(dirname "$0")/.."
root=$PWD
passed=0
failed=0
check() {  # NAME COMMAND...: one counted check
  local name=$1; shift
  if "$@" >"build/consumer-$name.log" 2>&1; then
    echo "consumer $name: ok"; passed=$((passed + 1))
  else
    echo "consumer $name: FAILED"; tail -40 "build/consumer-$name.log"; failed=$((failed + 1))
  fi
}

mkdir -p build
rm -f build/durable-rate-limiter-*.tgz
if ! npm pack --pack-destination build --silent >build/consumer-pack.log 2>&1; then
  echo "consumer pack: FAILED"; tail -40 build/consumer-pack.log
  echo "consumer: 0 passed, 1 failed"; exit 1
fi
tarball=$(ls "$root"/build/durable-rate-limiter-*.tgz)

# Install the tarball alone: the app's tools (vitest, the pool, wrangler,
# workers-types) resolve from the repository's node_modules above it.
rm -rf test/consumer/node_modules
(cd test/consumer && npm install --no-save --no-package-lock --ignore-scripts --no-audit --no-fund "$tarball" >"$root/build/consumer-install.log" 2>&1) \
  || { echo "consumer install: FAILED"; tail -40 build/consumer-install.log; echo "consumer: 0 passed, 1 failed"; exit 1; }

tsc=$root/node_modules/.bin/tsc
for mode in bundler nodenext node; do
  check "types-$mode" "$tsc" -p "test/consumer/types/tsconfig.$mode.json"
done
check types-app "$tsc" -p test/consumer/tsconfig.json
check types-vitest-config "$tsc" -p test/consumer/tsconfig.config.json
check publint node_modules/.bin/publint run --strict "$tarball"
# ESM only by design (Workers load ES modules): the one rule ignored is
# "a require() would get ESM"; node10 resolution (typesVersions) is checked.
check attw node_modules/.bin/attw "$tarball" --ignore-rules cjs-resolves-to-esm
# The consumer's own suite: each of its tests counts.
rm -f build/consumer-vitest.json
(cd test/consumer && "$root/node_modules/.bin/vitest" run --config vitest.config.ts \
  --reporter=default --reporter=json --outputFile="$root/build/consumer-vitest.json") >build/consumer-vitest.log 2>&1
rc=$?
read -r p f < <(node -e '
  try { const r = require(process.argv[1]); console.log(r.numPassedTests, r.numFailedTests + (r.numTotalTests === 0 ? 1 : 0)); }
  catch { console.log(0, 1); }' "$root/build/consumer-vitest.json")
if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then f=1; fi
echo "consumer vitest: $p passed, $f failed"
[ "$f" -eq 0 ] || tail -60 build/consumer-vitest.log
passed=$((passed + p))
failed=$((failed + f))

echo "consumer: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
