#!/usr/bin/env bash
# Builds the wasm module (libllamaweb + src/webgpu + the JS WebGPU glue web/lw-gpu.js) with Debian's
# Emscripten into build/wasm/: llamaweb-wasm.js (MODULARIZE factory `createLlamaweb`) + llamaweb-wasm.wasm.
# Needs scripts/setup-webgpu.sh (emscripten). Incremental (CMake + Ninja). LW_WASM_DIR picks another build
# directory (engineers working side by side each keep their own; the Node tests read the same variable).
set -euo pipefail
cd "$(dirname "$0")/.."
export NODE_PATH=${NODE_PATH:-/usr/share/nodejs} # Emscripten 3.1.6's JS tools need acorn from Debian's node dir
command -v emcmake >/dev/null || { echo "build-wasm: emscripten missing (run scripts/setup-webgpu.sh)" >&2; exit 1; }
jobs=${LW_JOBS:-2}
dir=${LW_WASM_DIR:-build/wasm}
emcmake cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=Release -DLW_BUILD_TESTS=OFF -DLW_WERROR=ON >/dev/null
ninja -C "$dir" -j"$jobs" llamaweb-wasm
ls -l "$dir"/llamaweb-wasm.js "$dir"/llamaweb-wasm.wasm | awk '{print "build-wasm: " $NF ": " $5 " bytes"}'
