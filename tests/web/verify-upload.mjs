// Opens a GGUF on this machine's Dawn adapter with verifyUpload (not a test: prints one line): every streamed
// weight byte read back from its GPU buffer and compared with the file, and how many of them lie past 4 GiB.
// The check that a big model's bytes land where they belong (issue "big models in a tab").
//   node tests/web/verify-upload.mjs FILE.gguf      (lavapipe by default; VK_ICD_FILENAMES picks another)
import { setup } from '../../web/lw-node.mjs';
import { GpuModel, fileSource } from '../../web/lw-model.mjs';

const f = process.argv[2];
if (!f) { console.error('usage: node tests/web/verify-upload.mjs FILE.gguf'); process.exit(2); }
const ctx = await setup();
if (ctx.skip) { console.log('SKIP: ' + ctx.skip); process.exit(0); }
const t0 = performance.now();
const g = await GpuModel.open(ctx.Module, fileSource(f), { nCtx: 64, nBatch: 8, verifyUpload: true }); // throws on a difference
const c = g.uploadCheck, MiB = (b) => (b / 2 ** 20).toFixed(0);
console.log(`${f}: ${g.info().buffers} buffers; ${c.writes} writes, ${MiB(c.bytes)} MiB read back, ${MiB(c.bytesPast4GiB)} MiB past ` +
  `4 GiB, ${c.mismatches} mismatches; ${((performance.now() - t0) / 1000).toFixed(0)} s`);
g.free();
process.exit(0);
