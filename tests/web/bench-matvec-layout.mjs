// Q4_0 decode mat-vec against the weights' memory layout (not a test: prints one line per case). Measures, at
// the decode shapes of an 8B llama, how far the integer mat-vec is from the read ceiling, and whether a layout
// with each block's 16 quant bytes apart from its scale (so a lane's block is one aligned 16-byte load and a
// subgroup's loads are one contiguous run) reads faster than ggml's 18-byte blocks, which the engine keeps on
// the GPU (4-byte loads 36 bytes apart per lane: block pairs). Cases, each N dispatches in one compute pass
// (wall clock of the submit, medians of 5; per dispatch = total / N):
//   read   a vec4<u32> grid-stride sum over the same bytes (the ceiling at that size; loads in flight: u)
//   aos    ggml blocks, a lane takes a block pair (9 words) per step, r rows per subgroup, u pairs in flight
//   soa    quants region + f16 scales region, a lane takes a block (one vec4<u32>), r rows, u blocks in flight
// Every product is checked against a float64 reference over sampled rows (nmse printed). Shapes whose weights
// fit the L2 (50 MB on the H100 / H200: all but 28672 x 4096) are read from it after the first dispatch.
// Measured on an H100 (2026-12-06, the engine's kernel through bench-matvec.mjs in the same call): 28672 x 4096
// engine 25.4 us (2.6 TB/s), ggml blocks here 27.2, split layout 25.9; at the L2-resident shapes all within
// ~1.5 us of each other. So the split layout would not pay for repacking every kernel's reads of Q4_0.
//   node tests/web/bench-matvec-layout.mjs [rows k iters]   (default: the 8B's four shapes, 100)
import { setup } from '../../web/lw-node.mjs';

const argv = process.argv.slice(2).map(Number);
const SHAPES = argv.length >= 2 ? [[argv[0], argv[1]]] : [[6144, 4096], [4096, 4096], [28672, 4096], [4096, 14336]];
const ITERS = argv[2] || 100;
const ctx = await setup();
if (ctx.skip) { console.log('SKIP: ' + ctx.skip); process.exit(0); }
const d = ctx.device;
if (!d.features.has('subgroups')) { console.log('SKIP: no subgroups'); process.exit(0); }
console.log(`adapter ${ctx.info.vendor} / ${ctx.info.device}; subgroups ${ctx.info.subgroupMinSize}-${ctx.info.subgroupMaxSize}; ${ITERS} dispatches per submit`);

// f16 bits of a float (round to nearest even; the scales below are normal numbers)
const f16 = (v) => { const f = new Float32Array([v]), u = new Uint32Array(f.buffer)[0]; const e = ((u >> 23) & 255) - 112, m = u & 0x7fffff;
  let h = ((u >>> 16) & 0x8000) | (e << 10) | (m >> 13); if ((m & 0x1fff) > 0x1000 || ((m & 0x1fff) === 0x1000 && (h & 1))) h++; return h; };
const f16v = (h) => { const e = (h >> 10) & 31, m = h & 1023, s = h & 0x8000 ? -1 : 1; return s * (e ? (1 + m / 1024) * 2 ** (e - 15) : m * 2 ** -24); };

const header = `enable subgroups;
diagnostic(off, subgroup_uniformity);
struct P { rows: u32, k: u32, nb: u32, gx: u32 }
@group(0) @binding(0) var<storage, read> w: array<WTYPE>;
@group(0) @binding(1) var<storage, read> ws: array<u32>;
@group(0) @binding(2) var<storage, read> xq: array<vec4<u32>>;
@group(0) @binding(3) var<storage, read> xs: array<vec2<f32>>;
@group(0) @binding(4) var<storage, read_write> y: array<f32>;
@group(0) @binding(5) var<uniform> p: P;
// 32 products of a block: lo nibbles are elements 0..15, hi nibbles 16..31 (ggml's Q4_0 byte order)
fn bdot(q: vec4<u32>, b: u32) -> f32 {
  let x0 = xq[2u * b]; let x1 = xq[2u * b + 1u];
  var s = 0;
  for (var k = 0u; k < 4u; k++) {
    s += dot4I8Packed(q[k] & 0x0f0f0f0fu, x0[k]) + dot4I8Packed((q[k] >> 4u) & 0x0f0f0f0fu, x1[k]);
  }
  let xv = xs[b];
  return (f32(s) - xv.y) * xv.x;
}
`;
// the row sums: subgroupAdd where subgroups are the 32-lane groups, else workgroup memory (CPU drivers)
const tail = `#if SG32
  for (var r = 0u; r < R; r++) {
    let t = subgroupAdd(acc[r]);
    if (sl == 0u) { y[row0 + r] = t; }
  }
#else
  for (var r = 0u; r < R; r++) { red[lid * R + r] = acc[r]; }
  workgroupBarrier();
  if (lid % 32u == 0u) {
    for (var r = 0u; r < R; r++) {
      var t = 0.0;
      for (var l = 0u; l < 32u; l++) { t += red[(lid + l) * R + r]; }
      y[row0 + r] = t;
    }
  }
#endif
}`;
const entry = `@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let row0 = ((wg.x + wg.y * p.gx) * (WG / 32u) + lid / 32u) * R; // rows: a multiple of R WG / 32
  let sl = lid % 32u;
  var acc: array<f32, R>;
`;
// ggml blocks: pair j of a row is words 9 j .. 9 j + 8: d0 | q0 bytes 0-1, q0 2-13, q0 14-15 | d1, q1 0-15
const AOS = (wg, R, U) => header.replace('WTYPE', 'u32') + `const WG: u32 = ${wg}u; const R: u32 = ${R}u; const U: u32 = ${U}u;
var<workgroup> red: array<f32, WG * R>;
` + entry + `  let np = p.nb / 2u;
  for (var j0 = sl; j0 < np; j0 += 32u * U) {
    var v: array<array<u32, 9>, R * U>;
    for (var u = 0u; u < U; u++) {
      let j = min(j0 + 32u * u, np - 1u);
      for (var r = 0u; r < R; r++) {
        let base = ((row0 + r) * np + j) * 9u;
        for (var e = 0u; e < 9u; e++) { v[r * U + u][e] = w[base + e]; }
      }
    }
    for (var u = 0u; u < U; u++) {
      if (j0 + 32u * u < np) {
        let j = j0 + 32u * u;
        for (var r = 0u; r < R; r++) {
          let a = v[r * U + u];
          let q0 = vec4<u32>((a[0] >> 16u) | (a[1] << 16u), (a[1] >> 16u) | (a[2] << 16u), (a[2] >> 16u) | (a[3] << 16u), (a[3] >> 16u) | (a[4] << 16u));
          let q1 = vec4<u32>(a[5], a[6], a[7], a[8]);
          let d0 = unpack2x16float(a[0]).x; let d1 = unpack2x16float(a[4]).y;
          acc[r] += d0 * bdot(q0, 2u * j) + d1 * bdot(q1, 2u * j + 1u);
        }
      }
    }
  }
` + tail;
// quants region (block i = row * nb + b at vec4 i), scales region (block i: half i % 2 of word i / 2)
const SOA = (wg, R, U) => header.replace('WTYPE', 'vec4<u32>') + `const WG: u32 = ${wg}u; const R: u32 = ${R}u; const U: u32 = ${U}u;
var<workgroup> red: array<f32, WG * R>;
` + entry + `  for (var b0 = sl; b0 < p.nb; b0 += 32u * U) {
    var q: array<vec4<u32>, R * U>;
    var sc: array<u32, R * U>;
    for (var u = 0u; u < U; u++) {
      let b = min(b0 + 32u * u, p.nb - 1u);
      for (var r = 0u; r < R; r++) {
        let i = (row0 + r) * p.nb + b;
        q[r * U + u] = w[i];
        sc[r * U + u] = ws[i / 2u] >> (16u * (i % 2u));
      }
    }
    for (var u = 0u; u < U; u++) {
      if (b0 + 32u * u < p.nb) {
        for (var r = 0u; r < R; r++) {
          acc[r] += unpack2x16float(sc[r * U + u]).x * bdot(q[r * U + u], b0 + 32u * u);
        }
      }
    }
  }
` + tail;
const READ = (U) => `struct P { n: u32, total: u32, a: u32, b: u32 }
@group(0) @binding(0) var<storage, read> w: array<vec4<u32>>;
@group(0) @binding(4) var<storage, read_write> y: array<f32>;
@group(0) @binding(5) var<uniform> p: P;
@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) g: vec3<u32>) {
  var s = vec4<u32>(0u);
  var i = g.x;
  for (; i + ${U - 1}u * p.total < p.n; i += ${U}u * p.total) {
    var v: array<vec4<u32>, ${U}>;
    for (var u = 0u; u < ${U}u; u++) { v[u] = w[i + u * p.total]; }
    for (var u = 0u; u < ${U}u; u++) { s += v[u]; }
  }
  for (; i < p.n; i += p.total) { s += w[i]; }
  if (s.x == 0x9e3779b9u && s.y == 0x7f4a7c15u) { y[0] = f32(s.z); }
}`;

const SG32 = ctx.info.subgroupMinSize === 32 && ctx.info.subgroupMaxSize === 32;
const pp = (code) => code.replace(/#if SG32\n([\s\S]*?)#else\n([\s\S]*?)#endif\n/g, (m, a, b) => (SG32 ? a : b));
const buf = (data, usage = GPUBufferUsage.STORAGE) => {
  const b = d.createBuffer({ size: Math.max(16, data.byteLength), usage: usage | GPUBufferUsage.COPY_DST });
  d.queue.writeBuffer(b, 0, data.buffer, data.byteOffset, data.byteLength); return b;
};
// bgs: one bind group per copy of the weights, taken in turn (copies past the L2: each dispatch reads memory)
const time = async (pipe, bgs, grid) => {
  const run = async (n) => {
    const enc = d.createCommandEncoder(), pass = enc.beginComputePass();
    pass.setPipeline(pipe);
    for (let i = 0; i < n; i++) { pass.setBindGroup(0, bgs[i % bgs.length]); pass.dispatchWorkgroups(...grid); }
    pass.end(); const t0 = performance.now(); d.queue.submit([enc.finish()]); await d.queue.onSubmittedWorkDone();
    return performance.now() - t0;
  };
  await run(2); const t = [];
  for (let i = 0; i < 5; i++) t.push(await run(ITERS));
  t.sort((a, b) => a - b); return (t[2] * 1000) / ITERS;
};
const readY = async (yb, n) => {
  const rb = d.createBuffer({ size: n * 4, usage: GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST });
  const enc = d.createCommandEncoder(); enc.copyBufferToBuffer(yb, 0, rb, 0, n * 4); d.queue.submit([enc.finish()]);
  await rb.mapAsync(GPUMapMode.READ); const y = new Float32Array(rb.getMappedRange().slice(0)); rb.destroy(); return y;
};

let seed = 12345;
const rnd = () => { seed = (Math.imul(seed, 1103515245) + 12345) >>> 0; return seed; };
for (const [rows, k] of SHAPES) {
  const nb = k / 32, nblk = rows * nb, bytes = nblk * 18;
  // ggml blocks, and the same blocks split into the two regions
  const aos = new Uint8Array(bytes), qs = new Uint32Array(nblk * 4), sc = new Uint32Array(Math.ceil(nblk / 2));
  const dw = new Float64Array(nblk);
  for (let i = 0; i < nblk; i++) {
    const h = f16(((rnd() >>> 8) / 2 ** 24 + 0.5) * 0.01); dw[i] = f16v(h);
    aos[i * 18] = h & 255; aos[i * 18 + 1] = h >> 8; sc[i >> 1] |= h << (16 * (i & 1));
    for (let j = 0; j < 4; j++) { const v = rnd(); qs[i * 4 + j] = v; for (let e = 0; e < 4; e++) aos[i * 18 + 2 + j * 4 + e] = (v >>> (8 * e)) & 255; }
  }
  const xb = new Int8Array(k), xsv = new Float32Array(nb * 2);
  for (let i = 0; i < k; i++) xb[i] = (rnd() % 255) - 127;
  for (let b = 0; b < nb; b++) { let s = 0; for (let j = 0; j < 32; j++) s += xb[b * 32 + j]; xsv[2 * b] = 0.02 + (rnd() % 100) / 5000; xsv[2 * b + 1] = 8 * s; }
  const ref = (r) => { let y = 0; for (let b = 0; b < nb; b++) { const i = r * nb + b; let s = 0;
    for (let j = 0; j < 16; j++) { const by = aos[i * 18 + 2 + j]; s += (by & 15) * xb[b * 32 + j] + (by >> 4) * xb[b * 32 + 16 + j]; }
    y += dw[i] * Math.fround(xsv[2 * b]) * (s - xsv[2 * b + 1]); } return y; };
  const sample = []; for (let r = 0; r < rows; r += Math.max(1, Math.floor(rows / 97))) sample.push(r); sample.push(rows - 1);
  const want = sample.map(ref);
  // copies of the weights: together at least 3x the 50 MB L2 of the H100 / H200 (LW_BENCH_COPIES=1: one copy,
  // read from L2 after the first dispatch where it fits, as bench-matvec.mjs does)
  const C = Number(process.env.LW_BENCH_COPIES || Math.ceil(150e6 / bytes));
  const copies = (a) => Array.from({ length: C }, () => buf(a));
  const bA = copies(aos), bQ = copies(qs), bS = copies(sc), bX = buf(new Uint32Array(xb.buffer)), bXs = buf(xsv);
  const yb = d.createBuffer({ size: rows * 4, usage: GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_SRC | GPUBufferUsage.COPY_DST });
  const mb = `${(bytes / 1e6).toFixed(1)} MB x${C}`;
  const line = (name, us, nmse) => console.log(`${rows}x${k} (${mb}) ${name.padEnd(18)} ${us.toFixed(2).padStart(7)} us  ${(bytes / us / 1e3).toFixed(0).padStart(5)} GB/s${nmse === undefined ? '' : '  nmse ' + nmse.toExponential(1)}`);
  for (const U of [1, 4, 8]) { // the ceiling
    const n = Math.floor(bytes / 16), wgs = Math.min(Math.ceil(n / 256 / U), 132 * 16), total = wgs * 256;
    const pipe = d.createComputePipeline({ layout: 'auto', compute: { module: d.createShaderModule({ code: READ(U) }), entryPoint: 'main' } });
    const pb = buf(new Uint32Array([n, total, 0, 0]), GPUBufferUsage.UNIFORM);
    const bgs = bQ.map((q) => d.createBindGroup({ layout: pipe.getBindGroupLayout(0), entries: [{ binding: 0, resource: { buffer: q } }, { binding: 4, resource: { buffer: yb } }, { binding: 5, resource: { buffer: pb } }] }));
    line(`read u${U} wg${wgs}`, await time(pipe, bgs, [wgs, 1, 1]));
  }
  for (const [kind, make, wbuf] of [['aos', AOS, bA], ['soa', SOA, bQ]]) {
    for (const [wg, R, U] of [[32, 4, 1], [32, 2, 2], [128, 2, 2], [128, 4, 1], [128, 1, 4], [256, 2, 2], [64, 4, 2], [128, 2, 4]]) {
      if (kind === 'aos' && (nb / 2) < 32 * U) continue;
      if (rows % (R * wg / 32)) continue;
      const groups = Math.ceil(rows / R / (wg / 32)), gx = Math.min(groups, 65535), gy = Math.ceil(groups / gx);
      let pipe;
      try { pipe = d.createComputePipeline({ layout: 'auto', compute: { module: d.createShaderModule({ code: pp(make(wg, R, U)) }), entryPoint: 'main' } }); }
      catch (e) { console.log(`${kind} wg${wg} r${R} u${U}: ${e.message}`); continue; }
      const pb = buf(new Uint32Array([rows, k, nb, gx]), GPUBufferUsage.UNIFORM);
      const bgs = wbuf.map((wb, c) => {
        const ents = [wb, bS[c], bX, bXs, yb].map((b, i) => ({ binding: i, resource: { buffer: b } })).filter((e) => kind === 'soa' || e.binding !== 1);
        ents.push({ binding: 5, resource: { buffer: pb } });
        return d.createBindGroup({ layout: pipe.getBindGroupLayout(0), entries: ents });
      });
      d.queue.writeBuffer(yb, 0, new Float32Array(rows).fill(NaN));
      const us = await time(pipe, bgs, [gx, gy, 1]);
      const y = await readY(yb, rows);
      let num = 0, den = 0; sample.forEach((r, i) => { num += (y[r] - want[i]) ** 2; den += want[i] ** 2; });
      line(`${kind} wg${wg} r${R} u${U}`, us, num / den);
    }
  }
  [...bA, ...bQ, ...bS, bX, bXs, yb].forEach((b) => b.destroy());
}
process.exit(0);
