#!/usr/bin/env bash
# Installs what a command needs on a fresh Debian machine, and nothing more;
# does nothing when it is already there. Shared by the README's commands and
# by .ci/run.
#
#   bash scripts/bootstrap.sh demo   the demonstration: emscripten, RapidJSON,
#                                    cmake and the package's npm dependencies
#                                    (core.wasm, dist/ and local workerd)
#   bash scripts/bootstrap.sh        everything the tests need besides: the
#                                    native tests' Catch2 and nlohmann, clang,
#                                    clang-format and libFuzzer, chromium
#                                    and the browser test's puppeteer-core
set -euo pipefail
cd "$(dirname "$0")/.."
profile=${1:-test}
case "$profile" in demo | test) ;; *) echo "bootstrap: unknown profile '$profile' (demo or test)" >&2; exit 2 ;; esac

missing=()
command -v cmake >/dev/null 2>&1 || missing+=(cmake)
command -v emcc >/dev/null 2>&1 || missing+=(emscripten)
[ -f /usr/include/rapidjson/document.h ] || missing+=(rapidjson-dev)
command -v node >/dev/null 2>&1 || missing+=(nodejs npm)
if [ "$profile" = test ]; then
  command -v g++ >/dev/null 2>&1 || missing+=(g++)
  command -v clang++ >/dev/null 2>&1 || missing+=(clang)
  command -v clang-format >/dev/null 2>&1 || missing+=(clang-format)
  [ -f /usr/include/catch2/catch.hpp ] || missing+=(catch2)
  [ -f /usr/include/nlohmann/json.hpp ] || missing+=(nlohmann-json3-dev)
  # libFuzzer's runtime ships separately from clang on Debian.
  compgen -G '/usr/lib/llvm-*/lib/clang/*/lib/linux/libclang_rt.fuzzer-x86_64.a' >/dev/null || missing+=(libclang-rt-dev)
  # The dashboard's browser test drives Debian's chromium (puppeteer-core downloads no browser).
  [ -x /usr/bin/chromium ] || missing+=(chromium)
fi

if [ ${#missing[@]} -gt 0 ]; then
  echo "bootstrap ($profile): installing ${missing[*]}"
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  # The demonstration takes no recommended extras (emscripten's numpy and d3).
  extra=()
  [ "$profile" = test ] || extra=(--no-install-recommends)
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${extra[@]}" "${missing[@]}" >/dev/null
fi

# npm ci only when the lockfile changed since the last install.
if [ ! -f node_modules/.package-lock.json ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
  echo "bootstrap: npm ci"
  npm ci --no-audit --no-fund --loglevel=error
fi

[ "$profile" = test ] || exit 0
# The browser test's own dependencies (puppeteer-core, pinned in
# test/browser/package-lock.json), kept apart from the package's: same rule.
if [ ! -f test/browser/node_modules/.package-lock.json ] || [ test/browser/package-lock.json -nt test/browser/node_modules/.package-lock.json ]; then
  echo "bootstrap: npm ci in test/browser"
  (cd test/browser && PUPPETEER_SKIP_DOWNLOAD=1 npm ci --ignore-scripts --no-audit --no-fund --loglevel=error)
fi
