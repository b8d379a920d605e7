#!/usr/bin/env bash
# WebGPU backend tests: builds the wasm module (scripts/build-wasm.sh) and runs the Node tests of tests/web/
# (npm `webgpu` = Dawn) once per CPU Vulkan driver: lavapipe (Mesa from bookworm-backports; shader-f16,
# 128 MiB bindings) and SwiftShader (from Debian's chromium; no shader-f16), then the browser tests once
# (headless Chromium, its own SwiftShader: kernels, and the demo page). A driver that is not installed is reported as skipped. The preprocessor's native tests (tests/test-wgsl-pp.c) run in the main ctest suite.
# Needs scripts/setup-webgpu.sh. Ends with one line: "N passed, N failed".
set -uo pipefail
cd "$(dirname "$0")/.."

passed=0 failed=0 skipped=0
if ! scripts/build-wasm.sh; then
  echo "test-webgpu: wasm build failed"
  echo "0 passed, 1 failed"
  exit 1
fi
wasm_dir=${LW_WASM_DIR:-build/wasm}
mkdir -p "$wasm_dir"

lavapipe=$(ls /usr/share/vulkan/icd.d/lvp_icd*.json 2>/dev/null | head -1)
swiftshader=/usr/lib/chromium/vk_swiftshader_icd.json

node_tests=$(ls tests/web/*.test.mjs | grep -vE '/(browser|demo|cache|cpu-fallback|structured-browser|csp)\.test\.mjs$')

# Each test file runs in its own node process under its own time limit (LW_WEB_TEST_TIMEOUT seconds, default
# 900), so a driver's total follows the work (a busy machine makes every file slower, not one limit too
# short for all of them), and a file that runs out of time is named with the test it was in (the one after
# the last that finished).
per_file=${LW_WEB_TEST_TIMEOUT:-900}
run_on() { # name icd-file [test files...]
  local name=$1 icd=$2 log=$wasm_dir/test-web-$1.log
  shift 2
  if [ -z "$icd" ] || [ ! -f "$icd" ]; then
    echo "test-webgpu: SKIP $name (not installed; run scripts/setup-webgpu.sh)"
    skipped=$((skipped + 1))
    return
  fi
  echo "test-webgpu: $name ($icd)"
  : >"$log"
  local f flog rc p=0 f_n=0 fp ff last t0
  for f in "$@"; do
    flog=$wasm_dir/test-web-$name-$(basename "$f" .test.mjs).log
    t0=$SECONDS
    VK_ICD_FILENAMES=$icd timeout "$per_file" node --test --test-reporter=tap "$f" >"$flog" 2>&1
    rc=$?
    cat "$flog" >>"$log"
    grep -E '^# \\# |^not ok' "$flog" | sed 's/^# \\# /  /; s/^/  /'
    fp=$(grep -E '^# pass [0-9]+' "$flog" | awk '{print $3}' | tail -1)
    ff=$(grep -E '^# fail [0-9]+' "$flog" | awk '{print $3}' | tail -1)
    if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then
      # Node 20's TAP names a test when it ends: the one running is the file's next after the last named
      last=$(grep -E '^(not )?ok [0-9]+ - ' "$flog" | tail -1 | sed -E 's/^(not )?ok [0-9]+ - //')
      echo "test-webgpu: $name: $f timed out after $per_file s in the test after: ${last:-(none: the first)}; log: $flog"
      fp=${fp:-0} ff=$((${ff:-0} + 1))
    elif [ -z "$fp" ] || [ -z "$ff" ]; then
      echo "test-webgpu: $name: $f: no test summary (exit $rc); log: $flog"
      tail -20 "$flog"
      fp=0 ff=1
    elif [ "$rc" -ne 0 ] && [ "$ff" -eq 0 ]; then
      ff=1 # a crash after the summary still fails
    fi
    echo "  $(basename "$f"): $fp passed, $ff failed ($((SECONDS - t0)) s)"
    p=$((p + fp))
    f_n=$((f_n + ff))
  done
  echo "  # pass $p"
  echo "  # fail $f_n"
  passed=$((passed + p))
  failed=$((failed + f_n))
}

# shellcheck disable=SC2086
run_on lavapipe "$lavapipe" $node_tests
# shellcheck disable=SC2086
run_on swiftshader "$swiftshader" $node_tests
run_on chromium /usr/bin/chromium tests/web/browser.test.mjs tests/web/demo.test.mjs tests/web/cache.test.mjs tests/web/cpu-fallback.test.mjs \
  tests/web/structured-browser.test.mjs tests/web/csp.test.mjs
[ "$skipped" -gt 0 ] && echo "test-webgpu: $skipped driver(s) skipped"
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
