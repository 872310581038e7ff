#!/usr/bin/env bash
# The packed tarball in a second consumer, on Node 22 with the current
# toolchain (besides the Node 20 pins everything else here runs on). The
# versions are pinned in one place, scripts/toolchain-22/package.json (Node
# 22 from npm, wrangler, @cloudflare/vitest-plugin 1.x (the renamed
# vitest-pool-workers), vitest, @cloudflare/workers-types, typescript), with
# its lockfile; `npm ci` installs them in build/toolchain-22/tools, again
# only when the lockfile changed. CI's verdict never follows the registry:
# scripts/toolchain-22-newest.sh (outside CI) says what the newest versions
# would change. Then, in a throwaway consumer made from test/consumer's own
# files (the import and the types renamed to the plugin):
#   - tsc with the new types, vitest.config.ts included;
#   - the consumer's vitest suite (cross-script DO binding and service binding
#     to the limiter as an auxiliary worker, miniflareLimiterWorker);
#   - wrangler deploy --dry-run of the app and of the limiter Worker.
# Prints the exact versions and "toolchain22: N passed, N failed".
#
# DRL_TOOLCHAIN22_MANIFEST=<folder> takes package.json (and package-lock.json,
# if there is one) from that folder instead, and DRL_TOOLCHAIN22_BASE=<folder>
# works there instead of build/toolchain-22: how the newest-versions report
# runs the same checks.
set -uo pipefail
cd "$(dirname "$0")/.."
root=$PWD
manifest=${DRL_TOOLCHAIN22_MANIFEST:-$root/scripts/toolchain-22}
base=${DRL_TOOLCHAIN22_BASE:-$root/build/toolchain-22}
passed=0
failed=0
started=$SECONDS
mkdir -p "$base/tools"
log() { echo "toolchain22: $*"; }
finish() { log "$passed passed, $failed failed ($((SECONDS - started))s)"; [ "$failed" -eq 0 ]; exit; }
check() {  # NAME COMMAND...: one counted check, run in $run
  local name=$1; shift
  if (cd "$run" && "$@") >"$base/$name.log" 2>&1; then
    log "$name: ok"; passed=$((passed + 1))
  else
    log "$name: FAILED"; tail -40 "$base/$name.log"; failed=$((failed + 1))
  fi
}
setup_failed() { log "$1: FAILED"; [ -f "${2:-}" ] && tail -40 "$2"; failed=$((failed + 1)); finish; }

# The pinned tools and Node 22 itself, installed when the manifest changed.
tools=$base/tools
if ! cmp -s "$manifest/package.json" "$tools/package.json" \
  || { [ -f "$manifest/package-lock.json" ] && ! cmp -s "$manifest/package-lock.json" "$tools/node_modules/.drl-installed-lock"; } \
  || [ ! -x "$tools/node_modules/.bin/node" ]; then
  t0=$SECONDS
  rm -rf "$tools/node_modules" "$tools/package-lock.json"
  cp "$manifest/package.json" "$tools/package.json"
  if [ -f "$manifest/package-lock.json" ]; then
    cp "$manifest/package-lock.json" "$tools/package-lock.json"
    (cd "$tools" && npm ci --no-audit --no-fund) >"$base/install-tools.log" 2>&1 \
      && cp "$manifest/package-lock.json" "$tools/node_modules/.drl-installed-lock" \
      || setup_failed "install the pinned toolchain" "$base/install-tools.log"
  else
    (cd "$tools" && npm install --no-audit --no-fund --no-package-lock) >"$base/install-tools.log" 2>&1 \
      || setup_failed "install the toolchain" "$base/install-tools.log"
  fi
  log "installed from $manifest in $((SECONDS - t0))s"
fi
export PATH=$tools/node_modules/.bin:$PATH   # node 22 first: npm, npx, wrangler and vitest now run on it
[[ "$(node --version)" == v22.* ]] || setup_failed "node 22 on PATH (found $(node --version))"
installed() { node -p "require('$tools/node_modules/$1/package.json').version" 2>/dev/null; }
log "node $(node --version), npm $(npm --version), $(for t in wrangler @cloudflare/vitest-plugin vitest @cloudflare/workers-types typescript; do printf '%s %s, ' "$t" "$(installed "$t")"; done)miniflare $(node -p "require('$tools/node_modules/@cloudflare/vitest-plugin/node_modules/miniflare/package.json').version" 2>/dev/null || installed miniflare)"

# The tarball (built by scripts/build-package.sh), and the throwaway consumer.
rm -rf "$tools"/run-*
run=$(mktemp -d "$tools/run-XXXXXX")
(npm pack --ignore-scripts --silent --pack-destination "$run" >"$base/pack.log" 2>&1) || setup_failed "npm pack" "$base/pack.log"
tarball=$(ls "$run"/durable-rate-limiter-*.tgz)
cp -r test/consumer/src test/consumer/test test/consumer/wrangler.jsonc test/consumer/worker-configuration.d.ts \
  test/consumer/vitest.config.ts test/consumer/tsconfig.json "$run"/
cp -r verify/local/onedev/limiter "$run"/limiter   # the limiter Worker as init scaffolds it
echo '{ "name": "drl-consumer-22", "private": true, "type": "module" }' >"$run/package.json"
# The renamed plugin: its import, its types, and the config typechecked with the app.
sed -i "s#'@cloudflare/vitest-pool-workers'#'@cloudflare/vitest-plugin'#" "$run/vitest.config.ts"
node -e '
  const fs = require("fs"); const p = process.argv[1];
  const c = JSON.parse(fs.readFileSync(p, "utf8"));
  c.compilerOptions.types = ["@cloudflare/workers-types", "@cloudflare/vitest-plugin/types"];
  c.include = [...c.include, "vitest.config.ts"];
  fs.writeFileSync(p, JSON.stringify(c, null, 2));' "$run/tsconfig.json"
(cd "$run" && npm install --no-save --no-package-lock --ignore-scripts --no-audit --no-fund --offline "$tarball") >"$base/install-tarball.log" 2>&1 \
  || setup_failed "install the tarball" "$base/install-tarball.log"
bin=$tools/node_modules/.bin

check types-app "$bin/tsc" -p tsconfig.json
# The consumer's suite: each of its tests counts.
rm -f "$base/vitest.json"
(cd "$run" && "$bin/vitest" run --config vitest.config.ts --reporter=default --reporter=json --outputFile="$base/vitest.json") >"$base/vitest.log" 2>&1
rc=$?
read -r p f < <(node -e '
  try { const r = require(process.argv[1]); console.log(r.numPassedTests, r.numFailedTests + (r.numTotalTests === 0 ? 1 : 0)); }
  catch { console.log(0, 1); }' "$base/vitest.json")
if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then f=1; fi
log "vitest: $p passed, $f failed"
[ "$f" -eq 0 ] || tail -60 "$base/vitest.log"
passed=$((passed + p))
failed=$((failed + f))
export WRANGLER_SEND_METRICS=false
check deploy-app "$bin/wrangler" deploy --dry-run --config wrangler.jsonc --outdir "$run/out-app"
check deploy-limiter "$bin/wrangler" deploy --dry-run --config limiter/wrangler.jsonc --outdir "$run/out-limiter"
[ "$failed" -eq 0 ] && rm -rf "$run"
finish
