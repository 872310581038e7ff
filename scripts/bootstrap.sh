#!/usr/bin/env bash
# Installs what the builds and tests need on a fresh Debian machine, and does
# nothing when everything is already there. Shared by the README's commands
# and by .ci/run.
set -euo pipefail
cd "$(dirname "$0")/.."

missing=()
command -v cmake >/dev/null 2>&1 || missing+=(cmake)
command -v emcc >/dev/null 2>&1 || missing+=(emscripten)
command -v clang++ >/dev/null 2>&1 || missing+=(clang)
[ -f /usr/include/nlohmann/json.hpp ] || missing+=(nlohmann-json3-dev)
[ -f /usr/include/catch2/catch.hpp ] || missing+=(catch2)
# libFuzzer's runtime ships separately from clang on Debian.
compgen -G '/usr/lib/llvm-*/lib/clang/*/lib/linux/libclang_rt.fuzzer-x86_64.a' >/dev/null || missing+=(libclang-rt-dev)
command -v node >/dev/null 2>&1 || missing+=(nodejs npm)
# The dashboard's browser test drives Debian's chromium (puppeteer-core downloads no browser).
[ -x /usr/bin/chromium ] || missing+=(chromium)

if [ ${#missing[@]} -gt 0 ]; then
  echo "bootstrap: installing ${missing[*]}"
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi

# npm ci only when the lockfile changed since the last install.
if [ ! -f node_modules/.package-lock.json ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
  echo "bootstrap: npm ci"
  npm ci --no-audit --no-fund --loglevel=error
fi

# The browser test's own dependencies (puppeteer-core, pinned in
# test/browser/package-lock.json), kept apart from the package's: same rule.
if [ ! -f test/browser/node_modules/.package-lock.json ] || [ test/browser/package-lock.json -nt test/browser/node_modules/.package-lock.json ]; then
  echo "bootstrap: npm ci in test/browser"
  (cd test/browser && PUPPETEER_SKIP_DOWNLOAD=1 npm ci --ignore-scripts --no-audit --no-fund --loglevel=error)
fi
