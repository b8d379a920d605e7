#!/usr/bin/env bash
# Packs what the WebGPU tests and the mat-vec benchmark need on a GPU machine that has no node, npm or
# network (TOOLCHAIN.md, "WebGPU on an NVIDIA H200 machine") into build/gpu-bundle/ (~32 MB):
#   node (xz), the npm `webgpu` package with only its linux-x64 dawn.node (xz), the Vulkan loader + GLVND
#   debs (apt-get download from this machine's apt sources), the wasm build, and run.sh.
# There, from a copy of the repository with build/gpu-bundle beside it:  bash build/gpu-bundle/run.sh
# (tests/web/matvec.test.mjs, then tests/web/bench-matvec.mjs; results also under $OUT when set).
set -euo pipefail
cd "$(dirname "$0")/.."
B=build/gpu-bundle
scripts/build-wasm.sh >/dev/null
[ -f node_modules/webgpu/dist/linux-x64/dawn.node ] || { echo "bundle: npm webgpu missing (scripts/setup-webgpu.sh)" >&2; exit 1; }
mkdir -p $B/webgpu/dist/linux-x64 $B/debs $B/wasm
[ -f $B/node.xz ] || xz -T2 -6 -c "$(command -v node)" >$B/node.xz
cp node_modules/webgpu/index.js node_modules/webgpu/package.json $B/webgpu/
[ -f $B/webgpu/dist/linux-x64/dawn.node.xz ] ||
  xz -T2 -6 -c node_modules/webgpu/dist/linux-x64/dawn.node >$B/webgpu/dist/linux-x64/dawn.node.xz
if ! ls $B/debs/*.deb >/dev/null 2>&1; then
  (cd $B/debs && apt-get download libvulkan1 libegl1 libglvnd0 libopengl0 libgl1 libglx0 libgles2 libx11-6 libxcb1 \
    libxau6 libxdmcp6 libbsd0 libmd0 libxext6 >/dev/null 2>&1)
  for f in $B/debs/*%3a*; do [ -e "$f" ] && mv "$f" "${f//%3a/_}"; done # epoch colons: plain file names
fi
cp build/wasm/llamaweb-wasm.js build/wasm/llamaweb-wasm.wasm $B/wasm/
cat >$B/run.sh <<'RUN'
#!/usr/bin/env bash
# Runs on the GPU machine from the repository root (see scripts/bundle-webgpu-gpu.sh).
set -u
B=build/gpu-bundle
OUT=${OUT:-$(mktemp -d)}
T=$(mktemp -d)
xz -dc $B/node.xz >$T/node && chmod +x $T/node
mkdir -p node_modules/webgpu/dist/linux-x64
cp $B/webgpu/index.js $B/webgpu/package.json node_modules/webgpu/
xz -dc $B/webgpu/dist/linux-x64/dawn.node.xz >node_modules/webgpu/dist/linux-x64/dawn.node
for f in $B/debs/*.deb; do dpkg -x "$f" /; done
ldconfig
export VK_DRIVER_FILES=${VK_DRIVER_FILES:-/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json}
export __EGL_VENDOR_LIBRARY_FILENAMES=${__EGL_VENDOR_LIBRARY_FILENAMES:-/usr/local/nvidia/share/glvnd/egl_vendor.d/10_nvidia.json}
mkdir -p build/wasm && cp $B/wasm/* build/wasm/
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null
timeout 300 $T/node --test --test-reporter=tap tests/web/matvec.test.mjs 2>&1 | grep -v artificially >$OUT/test.log
grep -E '^# \\# |^not ok|^# (tests|pass|fail|skipped) ' $OUT/test.log
timeout 240 $T/node tests/web/bench-matvec.mjs ${BENCH_ROWS:-8192} ${BENCH_K:-8192} ${BENCH_ITERS:-100} 2>&1 |
  grep -v artificially | tee $OUT/bench.log
RUN
chmod +x $B/run.sh
du -sh $B | awk '{print "bundle: " $2 " " $1}'
