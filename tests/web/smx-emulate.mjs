// The matrix-unit kernels (matmat-smx.wgsl) on an adapter without subgroup matrices (lavapipe, SwiftShader):
// a test harness, not shipped. emulateSmx(Module) makes the wasm build's GPU layer see a device with the i8
// 16 x 16 x 32 configuration and 32-wide subgroups, and rewrites each shader that enables
// chromium_experimental_subgroup_matrix into plain WGSL before Dawn compiles it:
//   var a: subgroup_matrix_result<i32, 16, 16> -> a handle to a zeroed slot of 256 i32 (every invocation
//                                                 holds all of its subgroup's matrices)
//   subgroupMatrixLoad<left, row_major>(&a..)  -> smx_ll_a(offset, stride): 16 rows x 32 bytes of a
//   subgroupMatrixLoad<right, col_major>(&a..) -> smx_lb_a(offset, stride): 16 columns x 32 bytes of a
//   subgroupMatrixMultiplyAccumulate(l, r, c)  -> smx_mma(l, r, c): c += l r in i32
//   subgroupMatrixStore<row_major>(&a, ..)     -> smx_st_a(offset, value, stride) (every invocation stores
//                                                 the same values)
//   @builtin(subgroup_id) sid                  -> lid / 32 (subgroups of 32 consecutive invocations)
// with offsets and strides in words of four bytes, as Dawn reads 8-bit matrices from an array<i32>. So the
// kernel's own tiling, pipelining, layouts and epilogue run for real and are checked against the CPU engine's
// products; only the matrix units' arithmetic is the emulation's. Every invocation does its subgroup's
// whole product: ~10^4 times the work, fine for test-sized problems.
const SMX = 'chromium-experimental-subgroup-matrix';

// Index of the bracket closing the one at s[i] ('<' or '('), nested brackets of the same kind counted.
function closing(s, i) {
  const open = s[i], close = open === '<' ? '>' : ')';
  let depth = 0;
  for (let j = i; j < s.length; j++) {
    if (s[j] === open) depth++;
    else if (s[j] === close && --depth === 0) return j;
  }
  throw new Error(`smx-emulate: unbalanced ${open} at ${i}`);
}
// Top-level comma-separated arguments of s.
function splitArgs(s) {
  const out = [];
  let depth = 0, at = 0;
  for (let j = 0; j < s.length; j++) {
    if (s[j] === '(' || s[j] === '<') depth++;
    else if (s[j] === ')' || s[j] === '>') depth--;
    else if (s[j] === ',' && depth === 0) out.push(s.slice(at, j).trim()), at = j + 1;
  }
  out.push(s.slice(at).trim());
  return out;
}

function helpers(loads, stores) {
  let s = `
// The matrices as handles into per-invocation pools (values of 2 KiB passed around made CPU drivers'
// compilers take minutes): left matrices in a ring of 4 (a K sub-step loads at most 4 before their last
// use), right ones in a ring of 2 (one fragment column's pair), results one slot each for the kernel's life.
var<private> smx_l: array<i32, 2048>;  // left 16 x 32: slot h, row m, byte k at 512 h + 32 m + k
var<private> smx_b: array<i32, 1024>;  // right 32 x 16: slot h, column n, byte k at 512 h + 32 n + k
var<private> smx_r: array<i32, 4096>;  // results 16 x 16: slot h, row m, column n at 256 h + 16 m + n
var<private> smx_nl: u32;
var<private> smx_nb: u32;
var<private> smx_nr: u32;
fn smx_sx8(w: i32, b: u32) -> i32 { return (w << (24u - 8u * b)) >> 24u; }
fn smx_new_r() -> u32 {
    let h = smx_nr;
    smx_nr++;
    for (var i = 0u; i < 256u; i++) { smx_r[256u * h + i] = 0; }
    return h;
}
fn smx_mma(a: u32, b: u32, c: u32) -> u32 {
    for (var m = 0u; m < 16u; m++) {
        for (var n = 0u; n < 16u; n++) {
            var acc = 0;
            for (var k = 0u; k < 32u; k++) { acc += smx_l[512u * a + 32u * m + k] * smx_b[512u * b + 32u * n + k]; }
            smx_r[256u * c + 16u * m + n] += acc;
        }
    }
    return c;
}
`;
  for (const [kind, a] of loads) {
    const [pool, count, ring] = kind === 'll' ? ['smx_l', 'smx_nl', 4] : ['smx_b', 'smx_nb', 2];
    s += `fn smx_${kind}_${a}(off: u32, stride: u32) -> u32 {
    let h = ${count} % ${ring}u;
    ${count}++;
    for (var m = 0u; m < 16u; m++) {
        for (var k = 0u; k < 32u; k++) { ${pool}[512u * h + 32u * m + k] = smx_sx8(${a}[off + m * stride + k / 4u], k % 4u); }
    }
    return h;
}
`;
  }
  for (const a of stores) {
    s += `fn smx_st_${a}(off: u32, h: u32, stride: u32) {
    for (var m = 0u; m < 16u; m++) {
        for (var n = 0u; n < 16u; n++) { ${a}[off + m * stride + n] = smx_r[256u * h + 16u * m + n]; }
    }
}
`;
  }
  return s;
}

// The plain-WGSL form of a module using subgroup matrices (see the top of this file).
export function emulateWgsl(code) {
  let s = code.replace(/enable chromium_experimental_subgroup_matrix;/, '');
  s = s.replace(/var (\w+): subgroup_matrix_result<i32,\s*16,\s*16>;/g, 'var $1: u32 = smx_new_r();');
  if (/subgroup_matrix_/.test(s.replace(/subgroupMatrixLoad<[^(]*\(/g, ''))) throw new Error('smx-emulate: a matrix type other than the accumulators');
  s = s.replace(/subgroupMatrixMultiplyAccumulate\(/g, 'smx_mma(');
  const loads = new Map(), stores = new Set();
  for (const name of ['subgroupMatrixLoad', 'subgroupMatrixStore']) {
    for (let i = s.indexOf(name + '<'); i >= 0; i = s.indexOf(name + '<', i)) {
      const t0 = i + name.length, t1 = closing(s, t0), tmpl = s.slice(t0 + 1, t1);
      if (s[t1 + 1] !== '(') throw new Error(`smx-emulate: ${name} without arguments`);
      const a1 = closing(s, t1 + 1), args = splitArgs(s.slice(t1 + 2, a1));
      const arr = args[0].replace(/^&/, '');
      let call;
      if (name === 'subgroupMatrixStore') {
        if (!/row_major/.test(tmpl)) throw new Error('smx-emulate: only row-major stores');
        stores.add(arr);
        call = `smx_st_${arr}(${args[1]}, ${args[2]}, ${args[3]})`;
      } else {
        const kind = /subgroup_matrix_left/.test(tmpl) && /row_major/.test(tmpl) ? 'll'
          : /subgroup_matrix_right/.test(tmpl) && /col_major/.test(tmpl) ? 'lb' : null;
        if (!kind) throw new Error(`smx-emulate: unsupported load ${tmpl}`);
        loads.set(kind + arr, [kind, arr]);
        call = `smx_${kind}_${arr}(${args[1]}, ${args[2]})`;
      }
      s = s.slice(0, i) + call + s.slice(a1 + 1);
      i += call.length;
    }
  }
  const sg = /,\s*@builtin\(subgroup_id\)\s*sid\s*:\s*u32/;
  if (!sg.test(s)) throw new Error('smx-emulate: main has no subgroup_id');
  s = s.replace(sg, '');
  const m = s.indexOf('fn main(');
  const body = s.indexOf('{', closing(s, s.indexOf('(', m)));
  s = s.slice(0, body + 1) + '\n    let sid = lid / 32u;' + s.slice(body + 1);
  return s + helpers(loads.values(), stores);
}

// Makes Module's GPU layer (web/lw-gpu.js) see the matrix units on its current device and compile their
// shaders as emulateWgsl rewrites them; returns the function that undoes it. Counts the shaders rewritten
// in the returned function's `rewritten`.
export function emulateSmx(Module) {
  const G = Module.lwGpu, device = G.device, info = G.adapterInfo;
  const features = new Set([...device.features, SMX]);
  let rewritten = 0;
  G.device = new Proxy(device, {
    get(t, k) {
      if (k === 'features') return features;
      if (k === 'createShaderModule') {
        return (desc) => {
          if (!/enable chromium_experimental_subgroup_matrix;/.test(desc.code)) return t.createShaderModule(desc);
          rewritten++;
          return t.createShaderModule({ ...desc, code: emulateWgsl(desc.code) });
        };
      }
      const v = t[k];
      return typeof v === 'function' ? v.bind(t) : v;
    },
  });
  const fake = {};
  for (const k of ['vendor', 'architecture', 'device', 'description']) fake[k] = info && info[k] || '';
  Object.assign(fake, { subgroupMinSize: 32, subgroupMaxSize: 32,
    subgroupMatrixConfigs: [{ componentType: 'i8', resultComponentType: 'i32', M: 16, N: 16, K: 32 }] });
  G.adapterInfo = fake;
  const restore = () => {
    G.device = device;
    G.adapterInfo = info;
  };
  Object.defineProperty(restore, 'rewritten', { get: () => rewritten });
  return restore;
}
