// Greedy agreement of the WebGPU model with the CPU engine in the same wasm module, shared by model.test.mjs
// and fuse.test.mjs: after `prompt`, n steps with the CPU's own choices fed to both (teacher forcing: one
// divergence does not cascade). Returns the share of steps where the GPU's argmax equals the CPU's greedy id,
// the largest logit difference relative to the logits' range, and the GPU model's info() (opts.labels: also
// the kernels' labels of one more step).
import { GpuModel, CpuModel, bytesSource } from '../../web/lw-model.mjs';

export async function agreement(M, bytes, prompt, n, opts = {}) {
  const nCtx = opts.nCtx || prompt.length + n + 8;
  const g = await GpuModel.open(M, bytesSource(bytes), { ...opts, nCtx });
  const c = CpuModel.open(M, bytes, nCtx, !!opts.kvF32);
  try {
    let gr = await g.decode(prompt, 'logits'), cNext = c.decode(prompt);
    let same = 0, worst = 0;
    for (let i = 0; i < n; i++) {
      if (gr.id === cNext) same++;
      const cl = c.logits(g.nVocab);
      let lo = Infinity, hi = -Infinity, d = 0;
      for (let j = 0; j < cl.length; j++) {
        lo = Math.min(lo, cl[j]);
        hi = Math.max(hi, cl[j]);
        d = Math.max(d, Math.abs(cl[j] - gr.logits[j]));
      }
      worst = Math.max(worst, d / (hi - lo));
      if (i + 1 < n) {
        gr = await g.decode([cNext], 'logits');
        cNext = c.decode([cNext]);
      }
    }
    let labels;
    if (opts.labels) { // the kernels (pipeline labels) of one more one-token step, recorded by the glue
      M.lwGpu.profileStart({ gpu: false });
      try {
        await g.decode([cNext]);
        labels = [...new Set((await M.lwGpu.profileRead()).labels)];
      } finally {
        M.lwGpu.profileStop();
      }
    }
    return { rate: same / n, worst, info: g.info(), variants: g.variants(), labels };
  } finally {
    g.free();
    c.free();
  }
}
