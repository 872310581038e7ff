#!/usr/bin/env bash
# What the newest toolchain would change (outside CI's verdict): looks up the
# newest Node 22 and the newest wrangler, @cloudflare/vitest-plugin 1.x,
# vitest, @cloudflare/workers-types and typescript, prints them beside the
# pins in scripts/toolchain-22/package.json, and, when any differs, runs
# scripts/test-toolchain-22.sh's checks on the newest ones (in
# build/toolchain-22-newest) so a maintainer sees whether moving the pins is
# safe. Moving them: edit the versions in scripts/toolchain-22/package.json,
# run `npm install` in that folder, commit both files.
#
#   bash scripts/toolchain-22-newest.sh            compare, then check the newest
#   bash scripts/toolchain-22-newest.sh --compare  compare only
set -uo pipefail
cd "$(dirname "$0")/.."
pins=scripts/toolchain-22/package.json
specs=(node@22 wrangler@latest @cloudflare/vitest-plugin@1 vitest@latest @cloudflare/workers-types@latest typescript@latest)
newest() {  # SPEC: the highest release version matching it (npm view lists a range's versions in publish order)
  npm view "$1" version --json 2>/dev/null | node -e '
    let v; try { v = [].concat(JSON.parse(require("fs").readFileSync(0, "utf8"))); } catch { process.exit(); }
    const key = (s) => s.split(/[.-]/).slice(0, 3).map(Number);
    v = v.filter((s) => !s.includes("-")).sort((a, b) => { const x = key(a), y = key(b); return x[0] - y[0] || x[1] - y[1] || x[2] - y[2]; });
    if (v.length) console.log(v[v.length - 1]);'
}
out=build/toolchain-22-newest/manifest
mkdir -p "$out"
changed=0
declare -A want=()
printf '%-28s %-16s %s\n' package pinned newest
for spec in "${specs[@]}"; do
  name=${spec%@*}
  pinned=$(node -p "require('./$pins').devDependencies['$name']")
  want[$name]=$(newest "$spec")
  [ -n "${want[$name]}" ] || { echo "toolchain22-newest: no answer from the registry for $spec" >&2; exit 2; }
  mark=""
  [ "$pinned" = "${want[$name]}" ] || { mark=" (differs)"; changed=1; }
  printf '%-28s %-16s %s%s\n' "$name" "$pinned" "${want[$name]}" "$mark"
done
if [ "$changed" -eq 0 ]; then echo "toolchain22-newest: the pins are the newest versions"; exit 0; fi
[ "${1:-}" = --compare ] && exit 0
node -e '
  const fs = require("fs"); const [pins, out, ...pairs] = process.argv.slice(1);
  const p = JSON.parse(fs.readFileSync(pins, "utf8"));
  for (let i = 0; i < pairs.length; i += 2) p.devDependencies[pairs[i]] = pairs[i + 1];
  fs.writeFileSync(out + "/package.json", JSON.stringify(p, null, 2) + "\n");' \
  "$pins" "$out" $(for n in "${!want[@]}"; do printf '%s %s ' "$n" "${want[$n]}"; done)
rm -f "$out/package-lock.json"
echo "toolchain22-newest: the same checks on the newest versions"
DRL_TOOLCHAIN22_MANIFEST=$out DRL_TOOLCHAIN22_BASE=$PWD/build/toolchain-22-newest bash scripts/test-toolchain-22.sh
