#!/usr/bin/env bash
# Builds the libFuzzer targets (clang, ASAN+UBSAN) and runs one of them.
#   scripts/fuzz.sh [TARGET=fuzz-gguf] [SECONDS=600]
# Seeds: tests/fuzz/seeds/<name without fuzz->/ (committed); the working corpus grows in build-fuzz/corpus-*.
# Crashes are written to build-fuzz/ as crash-*; add them to the seeds so ordinary runs replay them.
set -euo pipefail
cd "$(dirname "$0")/.."
target=${1:-fuzz-gguf}
secs=${2:-600}
cmake -S . -B build-fuzz -G Ninja -DCMAKE_C_COMPILER=clang -DLW_FUZZ=ON -DLW_BUILD_TESTS=OFF \
      -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
ninja -C build-fuzz "$target" >/dev/null
seeds="tests/fuzz/seeds/${target#fuzz-}"
corpus="build-fuzz/corpus-${target#fuzz-}"
mkdir -p "$corpus" "$seeds"
cd build-fuzz
exec "./$target" -max_total_time="$secs" -print_final_stats=1 -timeout=10 -rss_limit_mb=2048 \
     -max_len=65536 "../$corpus" "../$seeds"
