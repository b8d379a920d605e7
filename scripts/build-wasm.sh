#!/usr/bin/env bash
# Builds the wasm module (libllamaweb + src/webgpu + the JS WebGPU glue web/lw-gpu.js) with Debian's
# Emscripten into build/wasm/: llamaweb-wasm.js (MODULARIZE factory `createLlamaweb`) + llamaweb-wasm.wasm,
# one thread (WebGPU, and the CPU engine where a page is not cross-origin isolated). Then the same module
# with pthreads into build/wasm/mt/ (llamaweb-wasm.js, .wasm, .worker.js; its CMake tree is that folder):
# the browser package runs the CPU engine's threads with it on cross-origin isolated pages (COOP/COEP);
# LW_WASM_THREADS=0 skips it. Needs scripts/setup-webgpu.sh (emscripten). Incremental (CMake + Ninja).
# LW_WASM_DIR picks another build directory (engineers working side by side each keep their own; the Node
# tests read the same variable).
set -euo pipefail
cd "$(dirname "$0")/.."
export NODE_PATH=${NODE_PATH:-/usr/share/nodejs} # Emscripten 3.1.6's JS tools need acorn from Debian's node dir
command -v emcmake >/dev/null || { echo "build-wasm: emscripten missing (run scripts/setup-webgpu.sh)" >&2; exit 1; }
jobs=${LW_JOBS:-2}
dir=${LW_WASM_DIR:-build/wasm}
emcmake cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=Release -DLW_BUILD_TESTS=OFF -DLW_WERROR=ON >/dev/null
ninja -C "$dir" -j"$jobs" llamaweb-wasm
outs=("$dir"/llamaweb-wasm.js "$dir"/llamaweb-wasm.wasm)
if [ "${LW_WASM_THREADS:-1}" != 0 ]; then
  # -pthread everywhere (atomics, shared memory); the pool size is the page's choice at instantiation
  # (Module.lwPoolSize: the CPU engine's threads - 1, web/llamaweb.mjs), so a context's threads start
  # synchronously. The warning about memory growth with pthreads concerns JS reading the heap (a view check
  # per access); the engine's hot loops are in wasm.
  emcmake cmake -S . -B "$dir/mt" -G Ninja -DCMAKE_BUILD_TYPE=Release -DLW_BUILD_TESTS=OFF -DLW_WERROR=ON \
    -DCMAKE_C_FLAGS=-pthread "-DCMAKE_EXE_LINKER_FLAGS=-pthread -sPTHREAD_POOL_SIZE=Module.lwPoolSize -Wno-pthreads-mem-growth" >/dev/null
  ninja -C "$dir/mt" -j"$jobs" llamaweb-wasm
  outs+=("$dir"/mt/llamaweb-wasm.js "$dir"/mt/llamaweb-wasm.wasm "$dir"/mt/llamaweb-wasm.worker.js)
fi
ls -l "${outs[@]}" | awk '{print "build-wasm: " $NF ": " $5 " bytes"}'
