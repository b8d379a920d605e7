// One mat-vec check through the wasm module (web/lw-wasm-api.c), shared by the Node test (matvec.test.mjs)
// and the browser page (browser/matvec.html): random weights quantized by our C quantizers, GPU kernel via
// the C HAL + JS glue, normalised MSE against the CPU reference (dequantize + dot in double).

// ggml type ids, and the NMSE bound per arithmetic: f32 products differ from the double reference only by
// summation order (~1e-14 seen); f16 rounds every dequantized weight and product to 11 bits (~3e-7 seen).
export const TYPES = { F32: 0, F16: 1, Q4_0: 2, Q8_0: 8,
  BF16: 30, Q4_1: 3, Q5_0: 6, Q5_1: 7, Q2_K: 10, Q3_K: 11, Q4_K: 12, Q5_K: 13, Q6_K: 14, TQ1_0: 34, TQ2_0: 35, Q1_0: 41, Q2_0: 42,
  IQ4_NL: 20, IQ4_XS: 23, MXFP4: 39, NVFP4: 40, IQ2_XXS: 16, IQ2_XS: 17, IQ2_S: 22, IQ3_XXS: 18, IQ3_S: 21, IQ1_S: 19, IQ1_M: 29,
};
// Elements per block of the formats whose blocks are not 32 (F32/F16/BF16 rows need only a multiple of 8),
// and the smallest multiple of a type's block that is >= k (test shapes are given for 32-element blocks).
export const BLOCK = { F32: 8, F16: 8, BF16: 8, Q2_K: 256, Q3_K: 256, Q4_K: 256, Q5_K: 256, Q6_K: 256, TQ1_0: 256, TQ2_0: 256, Q1_0: 128, Q2_0: 64 };
Object.assign(BLOCK, { IQ4_XS: 256, NVFP4: 64, IQ2_XXS: 256, IQ2_XS: 256, IQ2_S: 256, IQ3_XXS: 256, IQ3_S: 256, IQ1_S: 256, IQ1_M: 256 });
export const kFor = (type, k) => Math.ceil(k / (BLOCK[type] ?? 32)) * (BLOCK[type] ?? 32);
export const BOUND = { f32: 1e-10, f16: 1e-5 };
// How the CPU engine rounds activations for each weight format (its vec_dot_type; shaders/actq.wgsl ACTQ):
// 1 Q8_0/Q8_1 blocks of 32, 2 Q8_K blocks of 256, 3 f16, 4 bf16, 0 none.
export const ACTQ = { F32: 0, F16: 3, BF16: 4, Q2_K: 2, Q3_K: 2, Q4_K: 2, Q5_K: 2, Q6_K: 2, TQ1_0: 2, TQ2_0: 2, IQ4_XS: 2,
  IQ2_XXS: 2, IQ2_XS: 2, IQ2_S: 2, IQ3_XXS: 2, IQ3_S: 2, IQ1_S: 2, IQ1_M: 2 };
export const actqOf = (type) => ACTQ[type] ?? 1;

function fail(M, h, what) {
  throw new Error(what + ': ' + M.UTF8ToString(M._lw_wasm_matvec_error(h)));
}

// Runs one variant on a fresh problem and returns measure(h) (after the GPU finished); throws with C's or the
// GPU's message on failure.
async function runMatvec(M, typeId, rows, k, { f16 = 0, sg = 0, wg = 64, rows: perWg = 1, blocks = 0, seed = 1, viaHost = false, chunk = 0, actq = 0, stage = 0, exact = 0, idot = 0 } = {}, measure) {
  const h = M._lw_wasm_matvec_new(typeId, rows, k, seed);
  if (!h) throw new Error('out of memory');
  let src = 0;
  try {
    if (M.UTF8ToString(M._lw_wasm_matvec_error(h)) !== '') fail(M, h, 'setup');
    if (viaHost) {
      // the weight bytes leave the heap once, into a JS-side source; C then streams them into the buffer
      const p = M._lw_wasm_matvec_weights(h), n = M._lw_wasm_matvec_weights_size(h);
      const bytes = M.HEAPU8.slice(p, p + n);
      src = M.lwGpu.addSource(viaHost === 'blob' ? M.lwGpu.blobSource(new Blob([bytes])) : M.lwGpu.bytesSource(bytes));
      if (chunk) M.lwGpu.chunkBytes = chunk;
    }
    // load phase: uploads (a streamed one completes asynchronously), then a step boundary
    if (M._lw_wasm_matvec_upload(h, src) !== 0) fail(M, h, 'upload');
    let err = await M.lwGpu.settle();
    if (err) throw new Error('GPU error after upload: ' + err);
    if (M._lw_wasm_matvec_run(h, f16, sg, wg, perWg, blocks, actq, stage, exact, idot) !== 0) fail(M, h, 'run');
    err = await M.lwGpu.settle();
    if (err) throw new Error('GPU error: ' + err);
    const r = measure(h);
    if (!(r >= 0)) fail(M, h, 'check');
    return r;
  } finally {
    M.lwGpu.chunkBytes = 8 << 20;
    if (src) M.lwGpu.removeSource(src);
    M._lw_wasm_matvec_free(h);
  }
}

// The NMSE of one run (cpu: against the CPU engine's own product, x rounded as it rounds it).
export const matvecNmse = (M, typeId, rows, k, opts = {}) =>
  runMatvec(M, typeId, rows, k, opts, (h) => (opts.cpu ? M._lw_wasm_matvec_nmse_cpu(h) : M._lw_wasm_matvec_nmse(h)));

// The number of rows whose bits differ from the CPU engine's product, in its plain order (repacked 0) or the
// gemv (1) or gemm (2) order it uses for repacked weights.
export const matvecMismatch = (M, typeId, rows, k, opts = {}) =>
  runMatvec(M, typeId, rows, k, opts, (h) => M._lw_wasm_matvec_mismatch(h, opts.repacked ?? 0));
