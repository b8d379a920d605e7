#!/usr/bin/env bash
# Builds the libFuzzer targets (clang, ASAN+UBSAN) and runs one of them, or each in turn.
#   scripts/fuzz.sh [TARGET=fuzz-gguf|all] [SECONDS=600]
# Environment: LW_FUZZ_BUILD (build directory, default build-fuzz), LW_FUZZ_JOBS (parallel fuzzing
# processes, default 1), LW_FUZZ_SEED (libFuzzer -seed, default 1: runs are repeatable), LW_FUZZ_TIMEOUT
# (seconds one input may take, wall clock, default 30: a busy 2-core machine makes a 0.5 s ASAN input take
# 10 s), LW_FUZZ_MODE (fuzz-model: cpu or gpu, one half of the target).
# Seeds: tests/fuzz/seeds/<name without fuzz->/ (committed; fuzz-model's are written by
# scripts/fuzz-seeds.sh); a dictionary tests/fuzz/<name>.dict is used when present (the GGUF targets share
# gguf.dict). The working corpus grows in $LW_FUZZ_BUILD/corpus-*. Crashes are written to $LW_FUZZ_BUILD as
# crash-*; fix them and add them to the seeds so ordinary runs (ctest's replay-<name>) replay them.
# Each run ends with a line "fuzz-NAME: N executions in S s, 0 findings" (or the finding's report).
set -euo pipefail
cd "$(dirname "$0")/.."
target=${1:-fuzz-gguf}
secs=${2:-600}
build=${LW_FUZZ_BUILD:-build-fuzz}
case "$build" in /*) ;; *) build="$PWD/$build" ;; esac
# compute kernels and constant tables without coverage hooks (tests/fuzz/coverage-ignore.txt says why)
cmake -S . -B "$build" -G Ninja -DCMAKE_C_COMPILER=clang -DLW_FUZZ=ON -DLW_BUILD_TESTS=OFF \
      -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_C_FLAGS="-fsanitize-coverage-ignorelist=$PWD/tests/fuzz/coverage-ignore.txt" >/dev/null
if [ "$target" = all ]; then
  for f in tests/fuzz/fuzz-*.c; do
    n=$(basename "$f" .c)
    "$0" "$n" "$secs"
  done
  exit 0
fi
ninja -C "$build" -j2 "$target" >/dev/null
short=${target#fuzz-}
seeds="$PWD/tests/fuzz/seeds/$short"
corpus="$build/corpus-$short"
mkdir -p "$corpus" "$seeds"
dict=()
case "$short" in gguf | model | tokenizer) dict=(-dict="$PWD/tests/fuzz/gguf.dict") ;; esac
[ -f "tests/fuzz/$short.dict" ] && dict=(-dict="$PWD/tests/fuzz/$short.dict")
jobs=${LW_FUZZ_JOBS:-1}
par=()
[ "$jobs" -gt 1 ] && par=(-jobs="$jobs" -workers="$jobs")
log="$build/fuzz-$short.log"
cd "$build"
set +e
"./$target" -max_total_time="$secs" -print_final_stats=1 -timeout="${LW_FUZZ_TIMEOUT:-30}" -rss_limit_mb=2048 -max_len=65536 \
  -seed="${LW_FUZZ_SEED:-1}" "${dict[@]}" "${par[@]}" "$corpus" "$seeds" 2>&1 | tee "$log" | grep -E 'DONE|ERROR|SUMMARY|crash-|stat::'
rc=${PIPESTATUS[0]}
set -e
runs=$(grep -E '^stat::number_of_executed_units' "$log" | awk '{s += $2} END {print s + 0}')
if [ "$rc" -eq 0 ]; then
  echo "$target: $runs executions in $secs s, 0 findings"
else
  echo "$target: FINDING after $runs executions (exit $rc): see $log and $build/crash-*"
fi
exit "$rc"
