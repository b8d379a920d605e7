// What one dispatch costs on this machine's Dawn, apart from any kernel's work (not a test: prints lines).
// A decode step of an 8B is ~300 dispatches of mostly small kernels, so the host's recording cost per
// dispatch and the GPU's gap between dependent dispatches bound tokens/s before any mat-vec does.
//   node tests/web/bench-dispatch.mjs [dispatches=320] [reps=20]
// Per case: JS us per dispatch while recording (setPipeline + setBindGroup + dispatchWorkgroups), us per
// submit (finish + queue.submit), and wall us per dispatch until the GPU is done (recording included);
// "chain": every dispatch reads and writes the same buffer (Dawn puts a barrier between each pair),
// "free": each dispatch its own buffer (no hazards); wg: workgroups per dispatch.
import { setup } from '../../web/lw-node.mjs';

const [N = 320, REPS = 20] = process.argv.slice(2).map(Number);
const ctx = await setup();
if (ctx.skip) { console.log('SKIP: ' + ctx.skip); process.exit(0); }
const d = ctx.device;
const code = `
@group(0) @binding(0) var<storage, read_write> buf: array<u32>;
struct P { a: u32, b: u32, c: u32, d: u32 };
@group(0) @binding(1) var<uniform> p: P;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) id: vec3<u32>) {
  let i = id.x & 1023u;
  buf[i] = buf[i] * 1664525u + p.a + 1u;
}`;
const module = d.createShaderModule({ code });
const bgl = d.createBindGroupLayout({ entries: [
  { binding: 0, visibility: GPUShaderStage.COMPUTE, buffer: { type: 'storage' } },
  { binding: 1, visibility: GPUShaderStage.COMPUTE, buffer: { type: 'uniform', hasDynamicOffset: true } }] });
const pipe = d.createComputePipeline({ layout: d.createPipelineLayout({ bindGroupLayouts: [bgl] }), compute: { module, entryPoint: 'main' } });
const uni = d.createBuffer({ size: 256 * 1024, usage: GPUBufferUsage.UNIFORM | GPUBufferUsage.COPY_DST });
const bufs = [], groups = [];
for (let i = 0; i < N; i++) {
  bufs.push(d.createBuffer({ size: 4096, usage: GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_SRC }));
  groups.push(d.createBindGroup({ layout: bgl, entries: [{ binding: 0, resource: { buffer: bufs[i] } }, { binding: 1, resource: { buffer: uni, size: 16 } }] }));
}
const offs = new Uint32Array(1);

async function once(mode, wg, submitEvery, typed) {
  let rec = 0, sub = 0;
  const t0 = performance.now();
  let enc = d.createCommandEncoder(), pass = enc.beginComputePass(), since = 0;
  for (let i = 0; i < N; i++) {
    const a = performance.now();
    pass.setPipeline(pipe);
    const g = groups[mode === 'chain' ? 0 : i];
    if (typed) { offs[0] = (i % 1024) * 256; pass.setBindGroup(0, g, offs, 0, 1); } else pass.setBindGroup(0, g, [(i % 1024) * 256]);
    pass.dispatchWorkgroups(wg, 1, 1);
    rec += performance.now() - a;
    if (++since === submitEvery || i === N - 1) {
      const b = performance.now();
      pass.end();
      d.queue.submit([enc.finish()]);
      sub += performance.now() - b;
      since = 0;
      if (i < N - 1) { enc = d.createCommandEncoder(); pass = enc.beginComputePass(); }
    }
  }
  await d.queue.onSubmittedWorkDone();
  return { wall: performance.now() - t0, rec, sub, submits: Math.ceil(N / submitEvery) };
}

console.log(`adapter ${ctx.Module.lwGpu.adapterInfo.device || ctx.Module.lwGpu.adapterInfo.vendor}; ${N} dispatches per run, median of ${REPS}`);
for (const mode of ['chain', 'free'])
  for (const wg of [1, 256])
    for (const submitEvery of [32, 1e9])
      for (const typed of [false, true]) {
        await once(mode, wg, submitEvery, typed);
        const rs = [];
        for (let r = 0; r < REPS; r++) rs.push(await once(mode, wg, submitEvery, typed));
        rs.sort((x, y) => x.wall - y.wall);
        const m = rs[REPS >> 1];
        console.log(`${mode.padEnd(5)} wg=${String(wg).padEnd(3)} submit=${submitEvery > N ? 'once' : submitEvery} offsets=${typed ? 'typed' : 'array'}: ` +
          `record ${(m.rec * 1e3 / N).toFixed(2)} us/dispatch, submit ${(m.sub * 1e3 / m.submits).toFixed(0)} us each ` +
          `(${(m.sub * 1e3 / N).toFixed(2)} us/dispatch), wall ${(m.wall * 1e3 / N).toFixed(2)} us/dispatch`);
      }
// GPU time alone: N dispatches in one pass between the pass's two timestamps (no per-dispatch pass, so this
// is the GPU's own gap between dependent or independent dispatches, launch and barrier included)
if (d.features.has('timestamp-query')) {
  const qs = d.createQuerySet({ type: 'timestamp', count: 2 });
  const res = d.createBuffer({ size: 16, usage: GPUBufferUsage.QUERY_RESOLVE | GPUBufferUsage.COPY_SRC });
  const rd = d.createBuffer({ size: 16, usage: GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST });
  for (const mode of ['chain', 'free'])
    for (const wg of [1, 256, 4096]) {
      const ts = [];
      for (let r = 0; r < REPS; r++) {
        const enc = d.createCommandEncoder();
        const pass = enc.beginComputePass({ timestampWrites: { querySet: qs, beginningOfPassWriteIndex: 0, endOfPassWriteIndex: 1 } });
        for (let i = 0; i < N; i++) {
          pass.setPipeline(pipe);
          pass.setBindGroup(0, groups[mode === 'chain' ? 0 : i], [(i % 1024) * 256]);
          pass.dispatchWorkgroups(wg, 1, 1);
        }
        pass.end();
        enc.resolveQuerySet(qs, 0, 2, res, 0);
        enc.copyBufferToBuffer(res, 0, rd, 0, 16);
        d.queue.submit([enc.finish()]);
        await rd.mapAsync(GPUMapMode.READ);
        const t = new BigInt64Array(rd.getMappedRange().slice(0));
        rd.unmap();
        ts.push(Number(t[1] - t[0]) / 1e3);
      }
      ts.sort((x, y) => x - y);
      console.log(`gpu ${mode.padEnd(5)} wg=${String(wg).padEnd(4)}: ${(ts[REPS >> 1] / N).toFixed(2)} us/dispatch on the GPU (one pass, timestamps at its ends)`);
    }
}
// What the profiler (web/lw-gpu.js profileStart({gpu: true})) reads for a kernel that does nothing (the H200 read 0: its timestamps are coarser than the kernel): each
// dispatch in its own pass with timestamps at its ends, as there; its numbers include this floor
if (d.features.has('timestamp-query')) {
  const qs = d.createQuerySet({ type: 'timestamp', count: 2 * 64 });
  const res = d.createBuffer({ size: 16 * 64, usage: GPUBufferUsage.QUERY_RESOLVE | GPUBufferUsage.COPY_SRC });
  const rd = d.createBuffer({ size: 16 * 64, usage: GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST });
  const ts = [];
  for (let r = 0; r < REPS; r++) {
    const enc = d.createCommandEncoder();
    for (let i = 0; i < 64; i++) {
      const pass = enc.beginComputePass({ timestampWrites: { querySet: qs, beginningOfPassWriteIndex: 2 * i, endOfPassWriteIndex: 2 * i + 1 } });
      pass.setPipeline(pipe);
      pass.setBindGroup(0, groups[0], [0]);
      pass.dispatchWorkgroups(1, 1, 1);
      pass.end();
    }
    enc.resolveQuerySet(qs, 0, 128, res, 0);
    enc.copyBufferToBuffer(res, 0, rd, 0, 16 * 64);
    d.queue.submit([enc.finish()]);
    await rd.mapAsync(GPUMapMode.READ);
    const t = new BigInt64Array(rd.getMappedRange().slice(0));
    rd.unmap();
    for (let i = 0; i < 64; i++) ts.push(Number(t[2 * i + 1] - t[2 * i]) / 1e3);
  }
  ts.sort((x, y) => x - y);
  console.log(`profiler floor (own pass, timestamps at its ends, 1 workgroup): median ${ts[ts.length >> 1].toFixed(2)} us per dispatch`);
}
// Host round trip of one small step: a dispatch, a 4-byte copy to a mappable buffer, mapAsync resolved
{
  const st = d.createBuffer({ size: 4, usage: GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST });
  const ts = [];
  for (let r = 0; r < 3 * REPS; r++) {
    const t0 = performance.now();
    const enc = d.createCommandEncoder(), pass = enc.beginComputePass();
    pass.setPipeline(pipe);
    pass.setBindGroup(0, groups[0], [0]);
    pass.dispatchWorkgroups(1, 1, 1);
    pass.end();
    enc.copyBufferToBuffer(bufs[0], 0, st, 0, 4);
    d.queue.submit([enc.finish()]);
    await st.mapAsync(GPUMapMode.READ);
    st.unmap();
    ts.push(performance.now() - t0);
  }
  ts.sort((x, y) => x - y);
  console.log(`round trip (dispatch + copy + mapAsync): median ${(ts[ts.length >> 1] * 1e3).toFixed(0)} us, min ${(ts[0] * 1e3).toFixed(0)} us`);
}
process.exit(0);
