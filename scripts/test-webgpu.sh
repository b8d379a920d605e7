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

node_tests=$(ls tests/web/*.test.mjs | grep -vE '/(browser|demo|cache|cpu-fallback)\.test\.mjs$')

run_on() { # name icd-file [test files...]
  local name=$1 icd=$2 log=$wasm_dir/test-web-$1.log
  shift 2
  if [ -z "$icd" ] || [ ! -f "$icd" ]; then
    echo "test-webgpu: SKIP $name (not installed; run scripts/setup-webgpu.sh)"
    skipped=$((skipped + 1))
    return
  fi
  echo "test-webgpu: $name ($icd)"
  VK_ICD_FILENAMES=$icd timeout 1200 node --test --test-reporter=tap "$@" >"$log" 2>&1
  local rc=$?
  grep -E '^# \\# |^not ok|^# (tests|pass|fail|skipped) ' "$log" | sed 's/^# \\# /  /; s/^/  /'
  local p f
  p=$(grep -E '^# pass [0-9]+' "$log" | awk '{print $3}' | tail -1)
  f=$(grep -E '^# fail [0-9]+' "$log" | awk '{print $3}' | tail -1)
  if [ -z "$p" ] || [ -z "$f" ]; then
    echo "test-webgpu: $name: no test summary (exit $rc); log: $log"
    tail -20 "$log"
    failed=$((failed + 1))
    return
  fi
  [ "$rc" -ne 0 ] && [ "$f" -eq 0 ] && f=1 # a crash after the summary still fails
  passed=$((passed + p))
  failed=$((failed + f))
}

# shellcheck disable=SC2086
run_on lavapipe "$lavapipe" $node_tests
# shellcheck disable=SC2086
run_on swiftshader "$swiftshader" $node_tests
run_on chromium /usr/bin/chromium tests/web/browser.test.mjs tests/web/demo.test.mjs tests/web/cache.test.mjs tests/web/cpu-fallback.test.mjs
[ "$skipped" -gt 0 ] && echo "test-webgpu: $skipped driver(s) skipped"
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
