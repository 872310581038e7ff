#!/usr/bin/env bash
# clang-format over the repository's C++ (the style in .clang-format):
#   bash scripts/clang-format.sh           rewrites the files in place
#   bash scripts/clang-format.sh --check   lists what differs, exits 1 if any
# The version is Debian 12's clang-format (14), which scripts/bootstrap.sh
# installs: another version may lay out a few lines differently.
set -euo pipefail
cd "$(dirname "$0")/.."
mapfile -t files < <(git ls-files '*.cpp' '*.h')
if [ "${1:-}" = --check ]; then
  bad=0
  for f in "${files[@]}"; do
    if ! clang-format --style=file "$f" | cmp -s - "$f"; then echo "clang-format: $f differs"; bad=1; fi
  done
  [ "$bad" -eq 0 ] && echo "clang-format: ${#files[@]} files ok"
  exit "$bad"
fi
clang-format --style=file -i "${files[@]}"
