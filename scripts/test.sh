#!/usr/bin/env bash
# Runs every test: installs dependencies (scripts/setup.sh), builds with gcc -Werror and runs the suite, then
# builds with clang -Werror under ASAN+UBSAN and runs the suite again, then the WebGPU tests (wasm build, Node +
# Dawn on lavapipe and SwiftShader, headless Chromium). Tests that need ../shared data or npm
# packages print SKIP and why. Ends with one line: "N passed, N failed".
set -uo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh || { echo "0 passed, 1 failed"; exit 1; }

passed=0 failed=0
run_suite() { # flavour
  local log="build/$1-ctest.log"
  if ! scripts/build.sh "$1"; then
    echo "build ($1) failed"
    failed=$((failed + 1))
    return
  fi
  (cd "build/$1" && ctest --output-on-failure -j2 --timeout 900) 2>&1 | tee "$log"
  # ctest: "100% tests passed, 0 tests failed out of 12"
  local line total nfail
  line=$(grep -E 'tests passed, [0-9]+ tests? failed out of [0-9]+' "$log" | tail -1)
  if [ -z "$line" ]; then
    failed=$((failed + 1))
    return
  fi
  nfail=$(echo "$line" | sed -E 's/.* ([0-9]+) tests? failed out of ([0-9]+).*/\1/')
  total=$(echo "$line" | sed -E 's/.* ([0-9]+) tests? failed out of ([0-9]+).*/\2/')
  passed=$((passed + total - nfail))
  failed=$((failed + nfail))
}

export ASAN_OPTIONS=detect_leaks=1:abort_on_error=0
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
run_suite release
# Under the sanitizers (about 3-10x slower) heavy tests may cover fewer seeds/sizes: they read this variable
# and say so; the release suite above always runs them in full.
export LW_TEST_SANITIZED=1
run_suite asan
unset LW_TEST_SANITIZED

# WebGPU: wasm build + kernel tests on lavapipe, SwiftShader and headless Chromium (its own summary line).
webgpu_log=build/webgpu-tests.log
scripts/test-webgpu.sh 2>&1 | tee "$webgpu_log"
line=$(grep -E '^[0-9]+ passed, [0-9]+ failed' "$webgpu_log" | tail -1)
if [ -n "$line" ]; then
  passed=$((passed + $(echo "$line" | awk '{print $1}')))
  failed=$((failed + $(echo "$line" | awk '{print $3}')))
else
  failed=$((failed + 1))
fi
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
