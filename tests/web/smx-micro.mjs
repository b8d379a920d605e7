// Debug micro-benchmark (not a test): i8 subgroup-matrix products with loads from nowhere / workgroup memory /
// storage, constant or run-time strides, to find what limits matmat-smx.wgsl. Only the run-time stride
// ("uniform") lines mean anything: with constant strides and loop-invariant data the compiler hoists the work
// (the H200 printed impossible rates). Measured there (2112 workgroups of 128): products from workgroup
// memory ~1,000-1,200 TOPS, loads from the storage buffer 111 TOPS at 4 products a load, 334 at 12.
//   node tests/web/smx-micro.mjs   (the GPU bundle: STEPS=node NODE_ARGS=tests/web/smx-micro.mjs)
import { setup } from '../../web/lw-node.mjs';
const ctx = await setup();
if (ctx.skip) { console.log('SKIP ' + ctx.skip); process.exit(0); }
const d = ctx.device;
const G = 2112, WG = 128, ITERS = 256;
const src = d.createBuffer({ size: 64 << 20, usage: GPUBufferUsage.STORAGE });
const dst = d.createBuffer({ size: G * 4 * 1024 * 4, usage: GPUBufferUsage.STORAGE });
const ub = d.createBuffer({ size: 16, usage: GPUBufferUsage.UNIFORM | GPUBufferUsage.COPY_DST });
d.queue.writeBuffer(ub, 0, new Uint32Array([20, 1024, 0, 0]));
function wgsl({ l, r, stride, nmma }) {
  const S = stride === 'const' ? '20u' : 'u.s';
  const SG = stride === 'const' ? '1024u' : 'u.g';
  const ld = (kind, where, t) => where === 'wg'
    ? `subgroupMatrixLoad<subgroup_matrix_${kind}<i8, ${kind === 'left' ? '32, 16' : '16, 32'}>, ${kind === 'left' ? 'row_major' : 'col_major'}>(&sh, ((it + ${t}u) % 4u) * 320u + sid * 8u, ${S})`
    : `subgroupMatrixLoad<subgroup_matrix_${kind}<i8, ${kind === 'left' ? '32, 16' : '16, 32'}>, ${kind === 'left' ? 'row_major' : 'col_major'}>(&src, ((wg.x % 64u) * 16u + (it % 16u)) * ${SG} + sid * 8u + ${t}u * 8u, ${SG})`;
  let body = '';
  if (l !== 'none') body += `    let l = ${ld('left', l, 0)};\n`;
  if (r !== 'none') body += `    let r = ${ld('right', r, 1)};\n`;
  for (let i = 0; i < nmma; i++) body += `    a${i % 4} = subgroupMatrixMultiplyAccumulate(${l !== 'none' ? 'l' : 'l0'}, ${r !== 'none' ? 'r' : 'r0'}, a${i % 4});\n`;
  return `enable chromium_experimental_subgroup_matrix;
struct U { s: u32, g: u32, p0: u32, p1: u32 }
@group(0) @binding(0) var<storage, read> src: array<i32>;
@group(0) @binding(1) var<storage, read_write> dst: array<i32>;
@group(0) @binding(2) var<uniform> u: U;
var<workgroup> sh: array<i32, 1536>;
@compute @workgroup_size(${WG})
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) lid: u32, @builtin(subgroup_id) sid: u32) {
  for (var i = lid; i < 1536u; i += ${WG}u) { sh[i] = src[i + wg.x]; }
  workgroupBarrier();
  let l0 = subgroupMatrixLoad<subgroup_matrix_left<i8, 32, 16>, row_major>(&sh, sid * 8u, 20u);
  let r0 = subgroupMatrixLoad<subgroup_matrix_right<i8, 16, 32>, col_major>(&sh, 320u + sid * 8u, 20u);
  var a0: subgroup_matrix_result<i32, 16, 16>;
  var a1: subgroup_matrix_result<i32, 16, 16>;
  var a2: subgroup_matrix_result<i32, 16, 16>;
  var a3: subgroup_matrix_result<i32, 16, 16>;
  for (var it = 0u; it < ${ITERS}u; it++) {
${body}  }
  let o = (wg.x * 4u + sid) * 1024u;
  subgroupMatrixStore<row_major>(&dst, o, a0, 16u);
  subgroupMatrixStore<row_major>(&dst, o + 256u, a1, 16u);
  subgroupMatrixStore<row_major>(&dst, o + 512u, a2, 16u);
  subgroupMatrixStore<row_major>(&dst, o + 768u, a3, 16u);
}`;
}
async function time(cfg) {
  const mod = d.createShaderModule({ code: wgsl(cfg) });
  const info = await mod.getCompilationInfo();
  const errs = info.messages.filter((m) => m.type === 'error');
  if (errs.length) return 'compile: ' + errs.map((m) => m.message).join('; ');
  const pipe = d.createComputePipeline({ layout: 'auto', compute: { module: mod, entryPoint: 'main' } });
  const bg = d.createBindGroup({ layout: pipe.getBindGroupLayout(0), entries: [{ binding: 0, resource: { buffer: src } }, { binding: 1, resource: { buffer: dst } }, { binding: 2, resource: { buffer: ub } }] });
  const run = async (n) => {
    const e = d.createCommandEncoder(), p = e.beginComputePass();
    p.setPipeline(pipe); p.setBindGroup(0, bg);
    for (let i = 0; i < n; i++) p.dispatchWorkgroups(G);
    p.end(); d.queue.submit([e.finish()]);
    await d.queue.onSubmittedWorkDone();
  };
  await run(2);
  const ts = [];
  for (let r = 0; r < 3; r++) { const t0 = performance.now(); await run(10); ts.push((performance.now() - t0) / 10); }
  ts.sort((a, b) => a - b);
  const ms = ts[1], ops = 2 * 16 * 16 * 32 * cfg.nmma * ITERS * (WG / 32) * G;
  return `${ms.toFixed(3)} ms  ${(ops / ms / 1e9).toFixed(0)} TOPS`;
}
const cfgs = [];
for (const nmma of [4, 12]) for (const [l, r] of [['none', 'none'], ['wg', 'none'], ['none', 'wg'], ['wg', 'wg'], ['st', 'none'], ['st', 'wg']])
  for (const stride of ['const', 'uniform']) cfgs.push({ l, r, stride, nmma });
for (const c of cfgs) console.log(`smx-micro mma ${c.nmma} left ${c.l} right ${c.r} stride ${c.stride}: ${await time(c)}`);
process.exit(0);
