#!/usr/bin/env bash
# The packed tarball in a second consumer, on Node 22 with the current
# toolchain (besides the Node 20 pins everything else here runs on):
#   - Node 22 from npm (`npm i node@22` in build/toolchain-22/node);
#   - the newest wrangler, @cloudflare/vitest-plugin 1.x (the renamed
#     vitest-pool-workers), the vitest it takes, @cloudflare/workers-types
#     and typescript, in build/toolchain-22/tools;
# both reused while they hold the newest versions (one registry look-up
# each), reinstalled when one moved. Then, in a throwaway consumer made from
# test/consumer's own files (the import and the types renamed to the plugin):
#   - tsc with the new types, vitest.config.ts included;
#   - the consumer's vitest suite (cross-script DO binding and service binding
#     to the limiter as an auxiliary worker, miniflareLimiterWorker);
#   - wrangler deploy --dry-run of the app and of the limiter Worker.
# Prints the exact versions and "toolchain22: N passed, N failed".
set -uo pipefail
cd "$(dirname "$0")/.."
root=$PWD
base=$root/build/toolchain-22
passed=0
failed=0
started=$SECONDS
mkdir -p "$base/node" "$base/tools"
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

# Node 22, kept while it is a 22.
node22=$base/node/node_modules/.bin/node
if ! [[ "$("$node22" --version 2>/dev/null)" == v22.* ]]; then
  (cd "$base/node" && echo '{ "private": true }' >package.json \
    && npm install --no-audit --no-fund --no-package-lock node@22) >"$base/install-node.log" 2>&1 \
    || setup_failed "install node@22" "$base/install-node.log"
fi
export PATH=$base/node/node_modules/.bin:$PATH   # npm, npx, wrangler and vitest now run on Node 22
[[ "$(node --version)" == v22.* ]] || setup_failed "node 22 on PATH"

# The newest of each tool (the plugin's major held at 1); offline, what is there.
declare -A want=()
tools=(wrangler @cloudflare/vitest-plugin vitest @cloudflare/workers-types typescript)
specs=(wrangler@latest @cloudflare/vitest-plugin@1 vitest@latest @cloudflare/workers-types@latest typescript@latest)
installed() { node -p "require('$base/tools/node_modules/$1/package.json').version" 2>/dev/null; }
stale=0
for i in "${!tools[@]}"; do
  # The highest match (npm view lists a range's versions in publish order, not by version).
  want[${tools[$i]}]=$(npm view "${specs[$i]}" version --json 2>/dev/null | node -e '
    let v; try { v = [].concat(JSON.parse(require("fs").readFileSync(0, "utf8"))); } catch { process.exit(); }
    const key = (s) => s.split(/[.-]/).slice(0, 3).map(Number);
    v = v.filter((s) => !s.includes("-")).sort((a, b) => { const x = key(a), y = key(b); return x[0] - y[0] || x[1] - y[1] || x[2] - y[2]; });
    if (v.length) console.log(v[v.length - 1]);')
  have=$(installed "${tools[$i]}")
  if [ -z "$have" ] || { [ -n "${want[${tools[$i]}]}" ] && [ "$have" != "${want[${tools[$i]}]}" ]; }; then stale=1; fi
done
if [ "$stale" -eq 1 ]; then
  t0=$SECONDS
  pins=()
  for i in "${!tools[@]}"; do pins+=("${tools[$i]}@${want[${tools[$i]}]:-${specs[$i]#*@}}"); done
  rm -rf "$base/tools/node_modules"
  (cd "$base/tools" && echo '{ "private": true, "type": "module" }' >package.json \
    && npm install --no-audit --no-fund --no-package-lock -D "${pins[@]}") >"$base/install-tools.log" 2>&1 \
    || setup_failed "install the toolchain" "$base/install-tools.log"
  log "installed ${pins[*]} in $((SECONDS - t0))s"
fi
log "node $(node --version), npm $(npm --version), $(for t in "${tools[@]}"; do printf '%s %s, ' "$t" "$(installed "$t")"; done)miniflare $(node -p "require('$base/tools/node_modules/@cloudflare/vitest-plugin/node_modules/miniflare/package.json').version" 2>/dev/null || installed miniflare)"

# The tarball (built by scripts/build-package.sh), and the throwaway consumer.
rm -rf "$base"/tools/run-*
run=$(mktemp -d "$base/tools/run-XXXXXX")
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
bin=$base/tools/node_modules/.bin

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
