#!/usr/bin/env bash
# Packs what the WebGPU tests and the mat-vec benchmark need on a GPU machine that has no node, npm or
# network (TOOLCHAIN.md, "WebGPU on an NVIDIA H200 machine") into build/gpu-bundle/ (~32 MB):
#   node (xz), the npm `webgpu` package with only its linux-x64 dawn.node (xz), the Vulkan loader + GLVND
#   debs (apt-get download from this machine's apt sources), the wasm build, a static `llamaweb` CLI (xz, to
#   write synthetic models there: models are too big to carry), and run.sh.
# There, from a copy of the repository with build/gpu-bundle beside it:  bash build/gpu-bundle/run.sh
# STEPS picks what runs (default "test bench"): test = every Node WebGPU test of tests/web; bench = the
# mat-vec GB/s benchmark (tests/web/bench-matvec.mjs); models = `llamaweb synth` of the llama-3.2-1b shape in
# each of $MODELS (default "q4_0 q4_k_m q8_0"; PRESET:TYPE for another preset; 32000-token vocab as
# TOOLCHAIN.md's anchors), then
# `node web/cli.mjs bench -p 512 -n 128` on each, once per entry of $SUBMITS (dispatches per command buffer,
# default 256) and of $TUNES (';'-separated tune JSON strings, default none); profile = `node web/cli.mjs
# profile -p $PP -n $PROFILE_N` (default 512, 32: GPU time per kernel per token, web/lw-profile.mjs) on each of
# $MODELS, once per entry of $SUBMITS (synthesized once per run for both steps). TESTS picks the test files
# (default tests/web/*.test.mjs); BENCH_TYPES the formats of the mat-vec benchmark. Logs also under $OUT.
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
W=${LW_WASM_DIR:-build/wasm} # where scripts/build-wasm.sh put it
cp $W/llamaweb-wasm.js $W/llamaweb-wasm.wasm $B/wasm/
cmake -S . -B build/static -G Ninja -DCMAKE_BUILD_TYPE=Release -DLW_BUILD_TESTS=OFF -DCMAKE_EXE_LINKER_FLAGS=-static >/dev/null
ninja -C build/static -j"${LW_JOBS:-2}" llamaweb-cli >/dev/null
xz -T2 -6 -c build/static/llamaweb >$B/llamaweb.xz
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
for step in ${STEPS:-test bench}; do
  case $step in
  test)
    [ -x $T/llamaweb ] || { xz -dc $B/llamaweb.xz >$T/llamaweb && chmod +x $T/llamaweb; }
    LW_CLI=$T/llamaweb timeout 420 $T/node --test --test-reporter=tap ${TESTS:-tests/web/*.test.mjs} 2>&1 | grep -v artificially >$OUT/test.log
    grep -E '^# \\# |^not ok|^# (tests|pass|fail|skipped) ' $OUT/test.log ;;
  bench)
    LW_BENCH_TYPES=${BENCH_TYPES:-} timeout 240 $T/node tests/web/bench-matvec.mjs ${BENCH_ROWS:-8192} ${BENCH_K:-8192} ${BENCH_ITERS:-100} 2>&1 |
      grep -v artificially | tee $OUT/bench.log ;;
  models | profile)
    [ -x $T/llamaweb ] || { xz -dc $B/llamaweb.xz >$T/llamaweb && chmod +x $T/llamaweb; }
    for pt in ${MODELS:-q4_0 q4_k_m q8_0}; do # TYPE or PRESET:TYPE (default preset llama-3.2-1b)
      t=${pt#*:}; pr=llama-3.2-1b; [ "$pt" != "$t" ] && pr=${pt%%:*}
      s0=$(date +%s)
      if [ ! -f $T/m-$pr-$t.gguf ]; then
        $T/llamaweb synth --preset $pr --type $t --vocab builtin --vocab-size 32000 -o $T/m-$pr-$t.gguf >/dev/null || continue
        echo "synth $pr $t: $(($(date +%s) - s0)) s, $(stat -c %s $T/m-$pr-$t.gguf) bytes"
      fi
      if [ $step = profile ]; then
        for se in ${SUBMITS:-256}; do
          echo "-- profile $pr $t submit $se" | tee -a $OUT/profile.log
          timeout 300 $T/node web/cli.mjs profile -m $T/m-$pr-$t.gguf -p ${PP:-512} -n ${PROFILE_N:-32} --submit $se 2>&1 |
            grep -v artificially | tee -a $OUT/profile.log
        done
        continue
      fi
      IFS=';' read -ra tunes <<<"${TUNES:-}"
      [ ${#tunes[@]} -eq 0 ] && tunes=("")
      for se in ${SUBMITS:-256}; do
        for tu in "${tunes[@]}"; do
          echo "-- $t submit $se${tu:+ tune $tu}" | tee -a $OUT/models.log
          timeout 300 $T/node web/cli.mjs bench -m $T/m-$pr-$t.gguf -p ${PP:-512} -n ${TG:-128} -r ${REPS:-3} --submit $se \
            ${tu:+--tune "$tu"} 2>&1 | grep -v artificially | tee -a $OUT/models.log
        done
      done
    done ;;
  esac
done
RUN
chmod +x $B/run.sh
du -sh $B | awk '{print "bundle: " $2 " " $1}'
