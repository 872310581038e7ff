#!/usr/bin/env bash
# Builds the package of a previous release from its git tag and keeps it as
# the compatibility suite's fixture (test/compat): the packed tarball and
# test/compat/fixtures/previous.json, both committed. CI never runs this; it
# checks the tarball's sha256 against the JSON.
#
#   bash scripts/build-compat-fixture.sh [TAG]    default v0.1.0
#
# The tag is checked out in a temporary detached worktree (removed
# afterwards), which installs its own dependencies from its own lockfile
# (npm ci, from the npm cache when it can), builds with its own
# scripts/build-package.sh (emscripten: see scripts/bootstrap.sh) and is
# packed with npm pack. A tarball of an older fixture is replaced.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
tag=${1:-v0.1.0}
out=$root/test/compat/fixtures

commit=$(git rev-parse --verify --quiet "$tag^{commit}") || {
  echo "build-compat-fixture: no tag or commit named '$tag' (git fetch --tags?)" >&2
  exit 2
}
command -v emcmake >/dev/null 2>&1 || { echo "build-compat-fixture: emcmake is missing: bash scripts/bootstrap.sh demo" >&2; exit 1; }

scratch=$(mktemp -d "${TMPDIR:-/tmp}/drl-compat-XXXXXX")
tree=$scratch/tree
cleanup() {
  git -C "$root" worktree remove --force "$tree" 2>/dev/null || true
  rm -rf "$scratch"
  git -C "$root" worktree prune
}
trap cleanup EXIT

echo "build-compat-fixture: $tag ($commit) in $tree"
git worktree add --detach --quiet "$tree" "$commit"
(
  cd "$tree"
  npm ci --prefer-offline --no-audit --no-fund --loglevel=error
  bash scripts/build-package.sh
)

version=$(node -p 'require(process.argv[1]).version' "$tree/package.json")
wire=$(sed -nE 's/^export const ENVELOPE_VERSION = ([0-9]+);.*/\1/p' "$tree/shim/envelope.ts")
[ -n "$wire" ] || { echo "build-compat-fixture: no ENVELOPE_VERSION in $tag's shim/envelope.ts" >&2; exit 1; }

mkdir -p "$out"
# The build above is what gets packed: --ignore-scripts skips prepack's second build.
tarball=$(cd "$tree" && npm pack --ignore-scripts --silent --pack-destination "$scratch")
for old in "$out"/*.tgz; do
  [ -e "$old" ] && [ "$(basename "$old")" != "$tarball" ] && rm -f "$old"
done
cp "$scratch/$tarball" "$out/$tarball"
sha256=$(sha256sum "$out/$tarball" | cut -d' ' -f1)

TAG=$tag COMMIT=$commit VERSION=$version WIRE=$wire TARBALL=$tarball SHA256=$sha256 node -e '
  const e = process.env;
  const fixture = { tag: e.TAG, commit: e.COMMIT, version: e.VERSION, wire: Number(e.WIRE), tarball: e.TARBALL, sha256: e.SHA256 };
  require("fs").writeFileSync(process.argv[1], JSON.stringify(fixture, null, 2) + "\n");
' "$out/previous.json"

echo "build-compat-fixture: $out/$tarball ($(du -k "$out/$tarball" | cut -f1) KB, wire $wire, sha256 $sha256)"
cat "$out/previous.json"
