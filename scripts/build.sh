#!/usr/bin/env bash
# Configures and builds one flavour of llamaweb into build/<flavour>:
#   release  gcc, -Werror              (default; the CLI used by scripts/demo.sh)
#   asan     clang, -Werror, ASAN+UBSAN
set -euo pipefail
cd "$(dirname "$0")/.."
flavour=${1:-release}
case "$flavour" in
  release) opts=(-DCMAKE_C_COMPILER=gcc -DLW_WERROR=ON -DCMAKE_BUILD_TYPE=Release) ;;
  asan) opts=(-DCMAKE_C_COMPILER=clang -DLW_WERROR=ON -DLW_SANITIZE=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo) ;;
  *) echo "unknown flavour $flavour" >&2; exit 2 ;;
esac
cmake -S . -B "build/$flavour" -G Ninja "${opts[@]}" >/dev/null
ninja -C "build/$flavour" -j"$(nproc)"
