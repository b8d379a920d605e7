#!/usr/bin/env bash
# Packs what the WebGPU tests and the mat-vec benchmark need on a GPU machine that has no node, npm or
# network (TOOLCHAIN.md, "WebGPU on an NVIDIA H200 machine") into build/gpu-bundle/ (~40 MB):
#   node (xz), the npm `webgpu` package with only its linux-x64 dawn.node (xz), the Vulkan loader + GLVND
#   debs (apt-get download from this machine's apt sources), the wasm build, a static `llamaweb` CLI (xz, to
#   write synthetic models there: models are too big to carry), llama.cpp's Vulkan libraries (xz) with the
#   bench/llama-bench-c harness, and run.sh.
# There, from a copy of the repository with build/gpu-bundle beside it:  bash build/gpu-bundle/run.sh
# STEPS picks what runs (default "test bench"): test = every Node WebGPU test of tests/web; bench = the
# mat-vec GB/s benchmark (tests/web/bench-matvec.mjs); models = `llamaweb synth` of the llama-3.2-1b shape in
# each of $MODELS (default "q4_0 q4_k_m q8_0"; PRESET:TYPE for another preset; 32000-token vocab as
# TOOLCHAIN.md's anchors), then
# `node web/cli.mjs bench -p 512 -n 128` on each, once per entry of $SUBMITS (dispatches per command buffer,
# default 256) and of $TUNES (';'-separated tune JSON strings, default none); profile = `node web/cli.mjs
# profile -p $PP -n $PROFILE_N` (default 512, 32: GPU time per kernel per token, web/lw-profile.mjs) on each of
# $MODELS, once per entry of $SUBMITS (synthesized once per run for both steps); compare = llamaweb against
# llama.cpp's Vulkan build side by side (TOOLCHAIN.md, "llama.cpp Vulkan as the side-by-side baseline"): each of
# $MODELS (PRESET:TYPE, default "llama-3.2-1b:q4_0 llama-3.2-1b:q8_0 llama-3.2-1b:q4_k_m llama-3.1-8b:q4_0
# llama-3.1-8b:q4_k_m") synthesized once, then $ROUNDS (default 2) rounds alternating `node web/cli.mjs bench -p
# $PP -n $TG -r $REPS $WEB_ARGS` and bench/llama-bench-c over libllama.vulkan (-ngl $NGL=99, --fa $FA=on, all
# CPUs, tg after $DEPTH=$PP prompt tokens as llamaweb's, $LLAMA_ARGS: e.g. "-ctk q8_0 -ctv q8_0" with WEB_ARGS="--kv
# q8_0" for quantized KV caches on both), one table row per model as it finishes and the whole
# table at the end (bench/gpu-compare.mjs: medians over rounds, ratios llamaweb / llama.cpp; also
# $OUT/compare.json, each run's output under $OUT/compare/). Five models take longer than one 10-minute device
# call: split $MODELS over calls (1B ones, then 8B ones). TESTS picks the test files (default
# tests/web/*.test.mjs); BENCH_TYPES the formats of the mat-vec benchmark; matmat = tests/web/bench-matmat.mjs
# on $MM_SHAPE (rows k tokens, default 4096 4096 512) for $MM_TYPES (default q4_0,q8_0,q4_K); node = the bundle's
# node on $NODE_ARGS (a script of the tree and its arguments); ab = `web/cli.mjs bench` on each of $MODELS
# with this tree's wasm and with $AB_WASM's (another build's llamaweb-wasm.{js,wasm} in a folder of the
# tree, e.g. the parent commit's), alternating, $ROUNDS rounds. Logs also under $OUT.
#
# The Vulkan build is npm's @node-llama-cpp/linux-x64-vulkan@3.21.1, fetched here on demand with `npm pack`
# into build/peer (not a package.json dependency: CI must not download its 27 MB); only the libraries the
# harness loads go into the bundle (llama-vulkan.tar.xz, ~9 MB). Without network the bundle is made without
# it and the compare step says so.
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
LLV=@node-llama-cpp/linux-x64-vulkan@3.21.1 P=build/peer
if [ ! -f $B/llama-vulkan.tar.xz ]; then
  tgz=$P/node-llama-cpp-linux-x64-vulkan-3.21.1.tgz
  mkdir -p $P
  [ -f $tgz ] || (cd $P && npm pack --silent $LLV >/dev/null 2>&1) || rm -f $tgz
  if [ -f $tgz ]; then
    rm -rf $P/vulkan && mkdir -p $P/vulkan && tar xzf $tgz -C $P/vulkan
    # the harness loads libllama.vulkan (which needs libggml.vulkan and libggml-base) and, through
    # ggml_backend_load_all_from_path, ggml-vulkan and the best ggml-cpu for the host's CPU (llama.cpp needs one)
    (cd $P/vulkan/package/bins/linux-x64-vulkan && tar cf - libllama.vulkan.v0.4.0.so libggml.vulkan.v0.4.0.so \
      libggml-base.so libggml-vulkan.so libggml-cpu-*.so) | xz -T2 -6 >$B/llama-vulkan.tar.xz.tmp
    mv $B/llama-vulkan.tar.xz.tmp $B/llama-vulkan.tar.xz
  else
    echo "bundle: npm pack $LLV failed (no network?): no llama.cpp Vulkan build, the compare step will say so" >&2
  fi
fi
mkdir -p build/static
${CC:-cc} -O2 -std=c11 -Wall -Wextra -Itests bench/llama-bench-c.c -ldl -o build/static/llama-bench-c
cp build/static/llama-bench-c $B/
cat >$B/run.sh <<'RUN'
#!/usr/bin/env bash
# Runs on the GPU machine from the repository root (see scripts/bundle-webgpu-gpu.sh).
set -u
B=build/gpu-bundle
OUT=${OUT:-$(mktemp -d)}
T=${LW_BUNDLE_TMP:-$(mktemp -d)} # node, the CLI and synthesized models; set it to share them between runs
mkdir -p $T
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
# A model of $MODELS entry $1 (TYPE or PRESET:TYPE, default preset llama-3.2-1b) in $T, made once per run:
# sets pr, t and f (its path); non-zero when synth failed.
synth_model() {
  t=${1#*:}; pr=llama-3.2-1b; [ "$1" != "$t" ] && pr=${1%%:*}
  f=$T/m-$pr-$t.gguf
  [ -f $f ] && return 0
  [ -x $T/llamaweb ] || { xz -dc $B/llamaweb.xz >$T/llamaweb && chmod +x $T/llamaweb; }
  local s0=$(date +%s)
  $T/llamaweb synth --preset $pr --type $t --vocab builtin --vocab-size 32000 -o $f.tmp >/dev/null || { rm -f $f.tmp; return 1; }
  mv $f.tmp $f
  echo "synth $pr $t: $(($(date +%s) - s0)) s, $(stat -c %s $f) bytes, $(nproc) threads"
}
for step in ${STEPS:-test bench}; do
  case $step in
  test)
    [ -x $T/llamaweb ] || { xz -dc $B/llamaweb.xz >$T/llamaweb && chmod +x $T/llamaweb; }
    LW_CLI=$T/llamaweb timeout 420 $T/node --test --test-reporter=tap ${TESTS:-tests/web/*.test.mjs} 2>&1 | grep -v artificially >$OUT/test.log
    grep -E '^# \\# |^not ok|^# (tests|pass|fail|skipped) ' $OUT/test.log ;;
  bench)
    LW_BENCH_TYPES=${BENCH_TYPES:-} timeout 240 $T/node tests/web/bench-matvec.mjs ${BENCH_ROWS:-8192} ${BENCH_K:-8192} ${BENCH_ITERS:-100} 2>&1 |
      grep -v artificially | tee $OUT/bench.log ;;
  matmat) # the prefill kernels: mat-mat variants (f32 tiles, integer products, matrix units) vs mat-vec per token
    timeout 300 $T/node tests/web/bench-matmat.mjs ${MM_SHAPE:-4096 4096 512} --type ${MM_TYPES:-q4_0,q8_0,q4_K} \
      --reps ${REPS:-3} 2>&1 | grep -v artificially | tee $OUT/matmat.log ;;
  node) # any script of the tree or the bundle: NODE_ARGS="path args"
    timeout 300 $T/node ${NODE_ARGS:-} 2>&1 | grep -v artificially | tee -a $OUT/node.log ;;
  models | profile)
    for pt in ${MODELS:-q4_0 q4_k_m q8_0}; do # TYPE or PRESET:TYPE (default preset llama-3.2-1b)
      synth_model $pt || continue
      if [ $step = profile ]; then
        for se in ${SUBMITS:-256}; do
          echo "-- profile $pr $t submit $se" | tee -a $OUT/profile.log
          timeout 300 $T/node web/cli.mjs profile -m $T/m-$pr-$t.gguf -p ${PP:-512} -n ${PROFILE_N:-32} --submit $se ${WEB_ARGS:-} 2>&1 |
            grep -v artificially | tee -a $OUT/profile.log
        done
        continue
      fi
      IFS=';' read -ra tunes <<<"${TUNES:-}"
      [ ${#tunes[@]} -eq 0 ] && tunes=("")
      for se in ${SUBMITS:-256}; do
        for tu in "${tunes[@]}"; do
          echo "-- $t submit $se${tu:+ tune $tu}" | tee -a $OUT/models.log
          timeout 300 $T/node web/cli.mjs bench -m $T/m-$pr-$t.gguf -p ${PP:-512} -n ${TG:-128} -r ${REPS:-3} --submit $se ${WEB_ARGS:-} \
            ${tu:+--tune "$tu"} 2>&1 | grep -v artificially | tee -a $OUT/models.log
        done
      done
    done ;;
  ab) # two wasm builds on the same files, alternating: $B/wasm (this tree) and $AB_WASM (a dir of the tree
    # holding another build's llamaweb-wasm.{js,wasm}, e.g. the parent commit's, copied there before the run)
    for pt in ${MODELS:-q4_0}; do
      synth_model $pt || continue
      for r in $(seq ${ROUNDS:-2}); do
        for w in build/wasm ${AB_WASM:?ab: set AB_WASM}; do
          echo "-- ab $pr $t round $r wasm $w" | tee -a $OUT/ab.log
          LW_WASM_DIR=$w timeout 300 $T/node web/cli.mjs bench -m $f -p ${PP:-512} -n ${TG:-128} -r ${REPS:-3} \
            ${WEB_ARGS:-} 2>&1 | grep -v artificially | tail -${AB_TAIL:-3} | tee -a $OUT/ab.log
        done
      done
    done ;;
  compare)
    [ -f $B/llama-vulkan.tar.xz ] || { echo "compare: $B/llama-vulkan.tar.xz missing (bundle made without network)"; continue; }
    L=$T/llama-vulkan # the bundle holds the libraries xz-compressed: unpacked into this run's temp dir once
    if [ ! -x $L/llama-bench-c ]; then
      mkdir -p $L && xz -dc $B/llama-vulkan.tar.xz | tar xf - -C $L
      cp $B/llama-bench-c $L/ && chmod +x $L/llama-bench-c # (the copy of the bundle may have lost its mode bits)
    fi
    C=$OUT/compare
    labels=()
    rm -rf $C && mkdir -p $C
    pp=${PP:-512} tg=${TG:-128}
    echo "compare: pp$pp tg$tg, ${ROUNDS:-2} rounds x ${REPS:-3} repetitions, llamaweb ${WEB_ARGS:-(defaults)} vs llama.cpp Vulkan -ngl ${NGL:-99} --fa ${FA:-on} -t $(nproc) ${LLAMA_ARGS:-}"
    for pt in ${MODELS:-llama-3.2-1b:q4_0 llama-3.2-1b:q8_0 llama-3.2-1b:q4_k_m llama-3.1-8b:q4_0 llama-3.1-8b:q4_k_m}; do
      synth_model $pt || { echo "compare: synth $pt failed"; continue; }
      labels+=($pr-$t)
      for r in $(seq ${ROUNDS:-2}); do # A B A B: drift of clocks or temperature falls on both engines
        timeout 300 $T/node web/cli.mjs bench -m $f -p $pp -n $tg -r ${REPS:-3} ${WEB_ARGS:-} 2>&1 | grep -v artificially >$C/$pr-$t.web.$r.txt
        LD_LIBRARY_PATH=$L${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} timeout 300 $L/llama-bench-c --lib $L/libllama.vulkan.v0.4.0.so \
          --backend-dir $L -ngl ${NGL:-99} --fa ${FA:-on} -t $(nproc) -p $pp -n $tg -d ${DEPTH:-$pp} -r ${REPS:-3} ${LLAMA_ARGS:-} --json -m $f \
          >$C/$pr-$t.llama.$r.txt 2>&1
      done
      $T/node bench/gpu-compare.mjs $C $pr-$t --rows-only
    done
    [ ${#labels[@]} -gt 0 ] && $T/node bench/gpu-compare.mjs $C "${labels[@]}" --json $OUT/compare.json | tee $OUT/compare.log ;;
  esac
done
RUN
chmod +x $B/run.sh
bash -n $B/run.sh
# the device transfer limit is 64 MiB per call, the repository tree included
du -sh $B | awk '{print "bundle: " $2 " " $1}'
[ "$(du -sm $B | cut -f1)" -le 50 ] || echo "bundle: over 50 MB: too close to the 64 MiB transfer limit" >&2
