// Mat-vec of a one-token step with the RMS norm of its input in the prologue (Q4_0 / Q8_0 weights in block
// pairs, Q4_K / Q5_K in sub-blocks; integer products), so the norm needs no dispatch of its own:
//   h = a + b                                     (ADD=1: the residual add before the norm, as the ADD op)
//   x = (h * (1 / sqrt(mean(h^2) + eps))) * nw    (rms-norm.wgsl's f32 arithmetic on GPUs, EXACT_SUM 0)
//   y = W q8(x)                                   (q8: actq-quant.wgsl's Q8_0 rounding; matvec-q8.wgsl PAIR)
// Why: on the H200 a one-row norm dispatch cost ~10 us of an 8B decode step (two per layer, 65 per token:
// leaving them out took tg128 from ~288 to ~355 t/s), far more than its work; here every workgroup reads the
// NK floats of a (and b) and the norm weight, which stay in L2, and rounds them into workgroup memory, a few
// us at the mat-vec's start that its weight streaming hides. Workgroup 0 also writes h (the residual stream).
// Work split: WG_SIZE / 32 row groups of 32 lanes, ROWS rows each; a group's lanes take consecutive block
// pairs of its rows (a subgroup reads a contiguous run of weight bytes, as matvec-q8.wgsl). A row's 32
// partial sums meet by subgroupAdd where the device's subgroups are exactly those 32 lanes (checked in the
// shader: WebGPU does not promise a layout), else in workgroup memory.
// GLU_OUT=1 (the FFN's gate|up projection, rows [gate | up] of F = rows / 2 each): a workgroup takes gate rows
// 32 j .. 32 j + 31 and the same up rows (each row group ROWS / 2 of each), then computes silu(gate) * up of its
// 32 elements (ops-common.wgsl swiglu4, as the SWIGLU op) and rounds them as one Q8_0 block into qo in
// actq-quant.wgsl's layout for k = F: the down projection's input, without a GLU or quantizer dispatch (on the
// H200 each cost ~7 us of an 8B step, 32 per token). Needs 64 rows a workgroup, ROWS even: 256 x 8, 512 x 4
// (two chunks of x per invocation in the prologue instead of four for rows of 4096), 1024 x 2.
// With KQ (Q4_K / Q5_K gate|up, a K-format down projection reading Q8_K activations) the 32 elements are
// also one Q8_0-style block (scale from their own largest |x|) whose group words are (d_x, sum of quants):
// the layout the K formats' integer mat-vec reads per 32-group (matvec-q8.wgsl takes d_x per group), so the
// down projection needs no quantizer dispatch. A Q8_K super-block would span 8 workgroups; the finer blocks
// round the down projection's input more closely than the CPU engine's Q8_K (not its bits).
// ROPE_OUT=1 (the attention block's fused Q|K|V projection, rows [q | k | v] of n_head, n_head_kv, n_head_kv
// heads of head_dim; NORMAL RoPE pairs, ROWS even): the sums are not written as y but as rope-qkv.wgsl would
// write them in its one-token step: Q rotated (times q_scale) into y at y_offset (q_out), K rotated into the
// K cache and V copied into the V cache at the token's cell, f16 (KV_F16=1, rounded to nearest even, a pair
// of rows per word) or f32. A pair (2i, 2i + 1) is two rows of one row group, so the lane holding both sums
// writes them: the rope_qkv dispatch goes (on the H200 ~10 us of a decode step per layer), and its values
// are the same bits (the same f32 sums, the same RoPE products: rope-common.wgsl).
// Defines: WEIGHT_TYPE (Q4_0 / Q8_0; Q4_K / Q5_K: KQ below), NK (elements per row, a multiple of 64; of 256
// for KQ), WG_SIZE (a power of two, 32 to 1024), ROWS (1..8), ADD (0/1), GLU_OUT (0/1), ROPE_OUT (0/1),
// KV_F16 (0/1), SUBGROUPS.
// Bindings: 0 weights (read), 1 a (read_write, vec4s), ADD: 2 b, 3 h (read_write, vec4s); then the norm weight
// (read, vec4s), y (read_write), GLU_OUT: qo (read_write, words), ROPE_OUT: K cache, V cache (read_write),
// frequency factors or the host's RoPE table (read), then params (uniform). a, b and h are read_write
// because they may share a buffer.
// Dispatch: (groups_x, ceil(groups / groups_x), 1) workgroups with groups = ceil(rows / (WG_SIZE / 32 * ROWS)).
#include "common.wgsl"
#include "types.wgsl"
#ifndef WEIGHT_TYPE
#error matvec-q8-norm.wgsl needs WEIGHT_TYPE
#endif
#if WEIGHT_TYPE == TYPE_Q4_K || WEIGHT_TYPE == TYPE_Q5_K
// KQ: super-blocks of 256 whose 64-element groups (two sub-blocks) are the lanes' units (matvec-q8.wgsl's
// terms), x rounded as Q8_K (ACTQ 2: one scale per 256 elements, quant sums per 32 for the minimums)
#define KQ 1
#elif WEIGHT_TYPE == TYPE_Q4_0 || WEIGHT_TYPE == TYPE_Q8_0
#define KQ 0
#else
#error matvec-q8-norm.wgsl: block pairs of Q4_0 or Q8_0, or Q4_K / Q5_K sub-blocks
#endif
#ifndef NK
#error matvec-q8-norm.wgsl needs NK
#endif
#if NK % 64 != 0 || (KQ && NK % 256 != 0)
#error matvec-q8-norm.wgsl: NK must be a multiple of 64 (block pairs; 256 for the K formats' super-blocks)
#endif
#ifndef WG_SIZE
#define WG_SIZE 256
#endif
#if WG_SIZE < 32 || WG_SIZE > 1024 || (WG_SIZE & (WG_SIZE - 1)) != 0
#error matvec-q8-norm.wgsl: WG_SIZE must be a power of two from 32 to 1024
#endif
#ifndef ROWS
#define ROWS 4
#endif
#if ROWS < 1 || ROWS > 8
#error matvec-q8-norm.wgsl: ROWS must be 1..8
#endif
#ifndef ADD
#define ADD 0
#endif
#ifndef GLU_OUT
#define GLU_OUT 0
#endif
#ifndef ROPE_OUT
#define ROPE_OUT 0
#endif
#ifndef KV_F16
#define KV_F16 0
#endif
// PREFETCH=1: the first block pair's weights of every row are loaded before the prologue (below), to overlap
// their latency with the norm; 0 (default): the loop loads them. On the H200 0 is faster (8B Q4_0 tg128 ~305
// -> ~334 t/s): the loads held through the prologue cost registers and occupancy more than they hide.
#ifndef PREFETCH
#define PREFETCH 0
#endif
// TILES=1: a grid of fewer workgroups than tiles of rows (NG * ROWS rows; GLU_OUT: 32 gate + 32 up), each
// taking tiles wg, wg + grid, ... (params.tile_step: the grid's workgroups) after one prologue, so the prologue's
// re-reads of x and its barriers are paid once per workgroup instead of once per tile.
#ifndef TILES
#define TILES 0
#endif
#if TILES && PREFETCH
#error matvec-q8-norm.wgsl: TILES has no PREFETCH
#endif
#if ROPE_OUT && (GLU_OUT || ROWS % 2 != 0)
#error matvec-q8-norm.wgsl: ROPE_OUT needs an even ROWS and no GLU_OUT
#endif
#if KQ && PREFETCH
#error matvec-q8-norm.wgsl: the K formats have no PREFETCH
#endif
#if GLU_OUT && ((WG_SIZE / 32) * ROWS != 64 || ROWS % 2 != 0)
#error matvec-q8-norm.wgsl: GLU_OUT needs 64 rows a workgroup in row groups of an even ROWS (32 gate and 32 up rows)
#endif
#if KQ
#define ACTQ 2
#define DQI_ALIGNED 1 // whole-word blocks (144 / 176 bytes); the plan checks the rows' offsets
#else
#define PAIR 1
#define ACTQ 1
#endif

struct NormMatvecParams {
    rows: u32,       // rows of W (= elements of y)
    row_stride: u32, // bytes from one row of W to the next
    w_offset: u32,   // byte offset of row 0 in w (a multiple of 4)
    groups_x: u32,   // workgroups along x of the grid
    a_offset: u32,   // first vec4 of a in its binding
    b_offset: u32,   // ADD: first vec4 of b
    h_offset: u32,   // ADD: first vec4 of h
    nw_offset: u32,  // first vec4 of the norm weight
    y_offset: u32,   // first element of y
    eps: f32,        // added to the mean square
    tile_step: u32,  // TILES: the grid's workgroups (the step between a workgroup's tiles)
    pad1: u32,
#if ROPE_OUT
    // rope-qkv.wgsl's QkvParams of the one-token step (its rows and groups_x renamed; q_out is y)
    n_head: u32,      // Q heads
    head_dim: u32,    // elements per head (even)
    n_rot: u32,       // rotated elements per head (even, <= head_dim)
    neox: u32,        // 0 (NORMAL pairs; the plan refuses NEOX)
    q_rows: u32,      // 1
    pos0: u32,        // the token's position
    x_offset: u32,    // (rope_qkv's q; unused)
    x_stride: u32,
    d_offset: u32,    // (= y_offset)
    d_stride: u32,
    ff_offset: u32,   // first frequency factor (or the table's first entry)
    has_ff: u32,      // 1: divide each pair's angle by ff[p]; 2: ff is the host's sin/cos table
    theta_scale: f32, // freq_base^(-2 / n_rot) (host powf, as the CPU)
    freq_scale: f32,  // ggml's freq_scale
    ext_factor: f32,  // YaRN mix (0: off)
    mscale: f32,      // sin/cos magnitude
    corr0: f32,       // YaRN correction dims
    corr1: f32,
    q_groups: u32,    // (unused)
    n_head_kv: u32,   // K and V heads
    k_offset: u32,    // (unused: k and v are this call's rows)
    k_stride: u32,
    kc_offset: u32,   // element of the token's cell in the K cache (even for f16)
    kc_stride: u32,
    v_offset: u32,
    v_stride: u32,
    vc_offset: u32,   // element of the token's cell in the V cache (even for f16)
    vc_stride: u32,
    q_scale: f32,     // factor of the rotated Q (1: plain ROPE; a folded SCALE's factor)
    qk_eps: f32,
    pad2: u32,
    pad3: u32,
#endif
}

@group(0) @binding(0) var<storage, read> w: array<u32>;
@group(0) @binding(1) var<storage, read_write> a: array<vec4<f32>>;
// (B_NW: the norm weight's binding; y, qo and params follow)
#if ADD
@group(0) @binding(2) var<storage, read_write> b: array<vec4<f32>>;
@group(0) @binding(3) var<storage, read_write> h: array<vec4<f32>>;
#define B_NW 4
#else
#define B_NW 2
#endif
@group(0) @binding(B_NW) var<storage, read> nw: array<vec4<f32>>;
@group(0) @binding(B_NW + 1) var<storage, read_write> y: array<f32>;
#if GLU_OUT
@group(0) @binding(B_NW + 2) var<storage, read_write> qo: array<u32>;
@group(0) @binding(B_NW + 3) var<uniform> params: NormMatvecParams;
#elif ROPE_OUT
#if KV_F16
alias CacheWord = u32;
#else
alias CacheWord = f32;
#endif
@group(0) @binding(B_NW + 2) var<storage, read_write> kc: array<CacheWord>;
@group(0) @binding(B_NW + 3) var<storage, read_write> vc: array<CacheWord>;
@group(0) @binding(B_NW + 4) var<storage, read> ff: array<f32>;
@group(0) @binding(B_NW + 5) var<uniform> params: NormMatvecParams;
#else
@group(0) @binding(B_NW + 2) var<uniform> params: NormMatvecParams;
#endif

#include "dequant-int.wgsl"
#include "ops-common.wgsl"
fn actq_x(i: u32) -> vec4<f32> { // (actq.wgsl's block scans, not called here)
    return vec4<f32>(f32(i) * 0.0);
}
#include "actq.wgsl"
#if KQ
const PW: u32 = 1u; // (the prefetch's registers: unused)
#else
#include "matvec-pair.wgsl"
#endif
#include "wg-sum.wgsl"

const LANES: u32 = 32u;                        // lanes of a row group
const NG: u32 = WG_SIZE / LANES;               // row groups
const CH: u32 = NK / 8u;                       // 8-element chunks of x (a quarter of a Q8_0 block)
const IT: u32 = (CH + WG_SIZE - 1u) / WG_SIZE; // chunks per invocation
#if KQ
const QB: u32 = 32u; // chunks per rounding block (a super-block of 256)

// (multiplier, scale) of a Q8_K super-block whose first element of largest |x| is mx (actq.wgsl actq_scale)
fn actq_k_scale(mx: f32) -> vec2<f32> {
    if (mx == 0.0f) {
        return vec2<f32>(0.0);
    }
    let s = div_rn(-127.0f, mx);
    return vec2<f32>(s, div_rn(1.0f, s));
}
#else
const QB: u32 = 4u; // chunks per rounding block (a Q8_0 block of 32)
#endif
#if KQ
// 64-element group g of the Q4_K / Q5_K block at byte b: its two sub-blocks' quants (dqi_sub's words, one
// load each for both) and (sc 2g, sc 2g + 1, m 2g, m 2g + 1). (dqi_sub loads the words once per sub-block.)
struct KqGroup {
    lo: array<u32, 8>, // sub-block 2g: low nibbles (Q5_K: and its fifth bits)
    hi: array<u32, 8>, // sub-block 2g + 1: high nibbles
    sc: vec4<i32>,     // the two scales, then the two minimums
}

fn kq_group(b: u32, g: u32) -> KqGroup {
    var r: KqGroup;
    for (var v = 0u; v < 8u; v++) {
#if WEIGHT_TYPE == TYPE_Q4_K
        let q = dqi_w(b + 16u + 32u * g + 4u * v);
        r.lo[v] = q & 0x0f0f0f0fu;
        r.hi[v] = (q >> 4u) & 0x0f0f0f0fu;
#else
        let q = dqi_w(b + 48u + 32u * g + 4u * v);
        let hb = dqi_w(b + 16u + 4u * v) >> (2u * g);
        r.lo[v] = (q & 0x0f0f0f0fu) | ((hb & 0x01010101u) << 4u);
        r.hi[v] = ((q >> 4u) & 0x0f0f0f0fu) | (((hb >> 1u) & 0x01010101u) << 4u);
#endif
    }
    r.sc = vec4<i32>(kscale_pairs(vec3<u32>(dqi_w(b + 4u), dqi_w(b + 8u), dqi_w(b + 12u)), g));
    return r;
}
#endif

var<workgroup> xq: array<vec4<u32>, NK / 16u>;  // x's quants, four to a word in element order
var<workgroup> xs: array<vec4<f32>, NK / 64u>;  // per block pair: (d_x, s_x) of both blocks
var<workgroup> bmax: array<atomic<u32>, NK / 32u>; // per block: bits of its largest |x| (starts at 0)
var<workgroup> bsum: array<atomic<i32>, NK / 32u>; // per block: sum of its quants
#if KQ
var<workgroup> bfirst: array<atomic<u32>, NK / 256u>; // per super-block: NK - the first element of largest |x|
var<workgroup> bsign: array<f32, NK / 256u>;          // per super-block: that element (its sign decides)
#endif
var<workgroup> red: array<f32, WG_SIZE * ROWS>; // row partials (row r of group g, lane l at (g ROWS + r) 32 + l)
#if GLU_OUT
const GH: u32 = ROWS / 2u;           // gate rows (and up rows) of a row group
var<workgroup> outv: array<f32, 64>; // the workgroup's rows: gate e at ROWS (e / GH) + e % GH, up e GH further
var<workgroup> gmax: atomic<u32>;    // bits of the block's largest |silu(gate) * up|
var<workgroup> gsum: atomic<i32>;    // its quants' sum
#endif
#if SUBGROUPS
var<workgroup> lay_far: atomic<u32>; // 1: some subgroup is not exactly a row group's 32 lanes
var<workgroup> lay_far_u: u32;       // the same, read by every invocation (uniform)
#endif

// Row r of the row group whose first row is row0 (rows past the end repeat the last: never stored).
fn row_of(row0: u32, r: u32) -> u32 {
#if GLU_OUT
    return select(row0 + r, params.rows / 2u + row0 + r - GH, r >= GH);
#else
    return min(row0 + r, params.rows - 1u);
#endif
}

#if ROPE_OUT
fn rope_src(which: u32, i: u32) -> f32 { // (rope_elem's input, not called here)
    return f32(which + i) * 0.0;
}
#include "rope-common.wgsl"

// Whether rows (row, row + 1) of the Q|K|V projection (row even) are a rotated pair, and its (cos, sin):
// computed before the weights' loop, so that its serial angle products (and the frequency factor's load)
// overlap the weights' trips to memory instead of lengthening every workgroup's end.
fn rope_pair(row: u32) -> vec3<f32> {
    let nq = params.n_head * params.head_dim;
    let nk = params.n_head_kv * params.head_dim;
    let e = select(row - nq, row, row < nq) % params.head_dim; // even: the pair's first element
    if (row >= params.rows || row >= nq + nk || e >= params.n_rot) {
        return vec3<f32>(0.0);
    }
    return vec3<f32>(rope_cs(params.pos0, e / 2u), 1.0);
}

// Rows (row, row + 1) with sums s0, s1 and rope_pair(row) = pc: rope-qkv.wgsl's one-token writes.
fn rope_store(row: u32, s0: f32, s1: f32, pc: vec3<f32>) {
    let nq = params.n_head * params.head_dim;
    let nk = params.n_head_kv * params.head_dim;
    let is_v = row >= nq + nk;
    var v0 = s0;
    var v1 = s1;
    if (pc.z != 0.0f) {
        v0 = rope_rot0(s0, s1, pc.xy);
        v1 = rope_rot1(s0, s1, pc.xy);
    }
    if (row < nq) {
        y[params.y_offset + row] = v0 * params.q_scale;
        y[params.y_offset + row + 1u] = v1 * params.q_scale;
        return;
    }
    let c = select(params.kc_offset + row - nq, params.vc_offset + row - nq - nk, is_v);
#if KV_F16
    let word = f16_bits_rne(v0) | (f16_bits_rne(v1) << 16u);
    if (is_v) {
        vc[c / 2u] = word;
    } else {
        kc[c / 2u] = word;
    }
#else
    if (is_v) {
        vc[c] = v0;
        vc[c + 1u] = v1;
    } else {
        kc[c] = v0;
        kc[c + 1u] = v1;
    }
#endif
}
#endif

#if GLU_OUT
#if KQ
// (multiplier, scale) of a 32-element block of largest |x| amax, as actq.wgsl's actq_scale_of (ACTQ 1)
fn glu_block_scale(amax: f32) -> vec2<f32> {
    if (amax == 0.0f) {
        return vec2<f32>(0.0);
    }
    return vec2<f32>(div_rn(127.0f, amax), f16_round(div_rn(amax, 127.0f)));
}
#endif
// The workgroup's 32 elements of silu(gate) * up rounded as one Q8_0 block into qo (actq-quant.wgsl's layout
// for k = F, one token); called by every invocation after outv holds the rows.
fn glu_out(item: u32, lid: u32) {
    let f = params.rows / 2u;
    var v = vec4<f32>(0.0);
    if (lid < 8u) {
        var gv: vec4<f32>;
        var uv: vec4<f32>;
        for (var j = 0u; j < 4u; j++) {
            let e = 4u * lid + j;
            gv[j] = outv[ROWS * (e / GH) + e % GH];
            uv[j] = outv[ROWS * (e / GH) + e % GH + GH];
        }
        v = swiglu4(gv, uv, item * 32u + 4u * lid, f);
        let a = abs(v);
        atomicMax(&gmax, bitcast<u32>(max(max(a.x, a.y), max(a.z, a.w))));
    }
    workgroupBarrier();
    let amax = bitcast<f32>(atomicLoad(&gmax));
#if KQ
    let sc = glu_block_scale(amax); // (actq.wgsl's Q8_0 rounding, defined for ACTQ 1 only)
#else
    let sc = actq_scale_of(amax);
#endif
    let qi = actq_quant4(v, sc);
    if (lid < 8u) {
        atomicAdd(&gsum, qi.x + qi.y + qi.z + qi.w);
        qo[item * 8u + lid] = pack4xI8(qi);
    }
    workgroupBarrier();
    if (lid == 0u) {
        let gw = actq_group_words(sc, amax, atomicLoad(&gsum));
        qo[f / 4u + 2u * item] = gw.x;
        qo[f / 4u + 2u * item + 1u] = gw.y;
#if TILES
        atomicStore(&gmax, 0u); // for the next tile (every read of both is behind the barriers above)
        atomicStore(&gsum, 0);
#endif
    }
}
#endif

// First row of tile item (GLU_OUT: its first gate row; the up rows are F = rows / 2 further), the first row
// of invocation lid's row group in it, and the tiles of the call.
fn tile_row_base(item: u32) -> u32 {
#if GLU_OUT
    return item * 32u;
#else
    return item * (NG * ROWS);
#endif
}

fn tile_row0(item: u32, lid: u32) -> u32 {
#if GLU_OUT
    return tile_row_base(item) + (lid / LANES) * GH;
#else
    return tile_row_base(item) + (lid / LANES) * ROWS;
#endif
}

fn n_tiles() -> u32 {
#if GLU_OUT
    return params.rows / 64u;
#else
    return (params.rows + NG * ROWS - 1u) / (NG * ROWS);
#endif
}

// Steps 3 and 4 for tile item (rows from row_base; this invocation's row group from row0): the rows' sums,
// written as y (ROPE_OUT: rope_store with the pair's (cos, sin) rpc; GLU_OUT: and glu_out). lay: 0 where
// the subgroups are the row groups.
fn rows_tile(item: u32, lid: u32, lay: u32, rpc: vec3<f32>, wpre: array<array<u32, PW>, ROWS>) {
    let kl = lid % LANES;
    let row_base = tile_row_base(item);
    let row0 = tile_row0(item, lid);
    // 3. the group's ROWS rows, block pairs kl, kl + 32, ... (rows past the end repeat the last: never stored);
    // KQ: 64-element groups (group t % 4 of super-block t / 4), both sub-blocks from one load of the group's 8
    // quant words (low and high nibbles) and one of its scales, matvec-q8.wgsl's integer terms. x's quants
    // and (d_x, s_x or sum) of the 64 elements from workgroup memory either way.
    var accr: array<f32, ROWS>;
    for (var t = kl; t < NK / 64u; t += LANES) {
        var xw: array<u32, 16>;
        for (var q = 0u; q < 4u; q++) {
            let p = xq[t * 4u + q];
            xw[4u * q] = p.x;
            xw[4u * q + 1u] = p.y;
            xw[4u * q + 2u] = p.z;
            xw[4u * q + 3u] = p.w;
        }
        let iv = xs[t];
#if KQ
        let s0 = bitcast<i32>(iv.y);
        let s1 = bitcast<i32>(iv.w);
        for (var r = 0u; r < ROWS; r++) {
            let bb = params.w_offset + row_of(row0, r) * params.row_stride + (t / 4u) * DQ_BYTES;
            let sp = kq_group(bb, t % 4u);
            var i0 = 0;
            var i1 = 0;
            for (var u = 0u; u < 8u; u++) {
                i0 += dot4I8Packed(sp.lo[u], xw[u]);
                i1 += dot4I8Packed(sp.hi[u], xw[8u + u]);
            }
            let dw = dqi_scales(bb);
            accr[r] += (iv.x * dw.x) * f32(sp.sc.x * i0 + sp.sc.y * i1) -
                       (iv.x * dw.y) * f32(sp.sc.z * s0 + sp.sc.w * s1);
        }
#else
        for (var r = 0u; r < ROWS; r++) {
            var ww = wpre[r]; // (the first step's)
            if (PREFETCH == 0 || t != kl) {
                let wb = (params.w_offset + row_of(row0, r) * params.row_stride) / 4u + t * PW;
                for (var j = 0u; j < PW; j++) {
                    ww[j] = w[wb + j];
                }
            }
            accr[r] += pair_term(&ww, &xw, iv);
        }
#endif
    }

    // 4. each row's 32 partial sums
#if SUBGROUPS
    if (lay == 0u) {
#if ROPE_OUT
        var sv: array<f32, ROWS>;
        for (var r = 0u; r < ROWS; r++) {
            sv[r] = subgroupAdd(accr[r]);
        }
        if (kl < ROWS / 2u && row0 + 2u * kl < params.rows) {
            rope_store(row0 + 2u * kl, sv[2u * kl], sv[2u * kl + 1u], rpc);
        }
#else
        for (var r = 0u; r < ROWS; r++) {
            let s = subgroupAdd(accr[r]);
#if GLU_OUT
            if (kl == 0u) {
                y[params.y_offset + row_of(row0, r)] = s;
                outv[(lid / LANES) * ROWS + r] = s;
            }
#else
            if (kl == 0u && row0 + r < params.rows) {
                y[params.y_offset + row0 + r] = s;
            }
#endif
        }
#if GLU_OUT
        workgroupBarrier();
        glu_out(item, lid);
#endif
#endif
        return;
    }
#endif
    for (var r = 0u; r < ROWS; r++) {
        red[((lid / LANES) * ROWS + r) * LANES + kl] = accr[r];
    }
    workgroupBarrier();
#if ROPE_OUT
    for (var o = lid; o < NG * ROWS / 2u; o += WG_SIZE) { // row pairs
        var s0 = 0.0f;
        var s1 = 0.0f;
        for (var l = 0u; l < LANES; l++) {
            s0 += red[2u * o * LANES + l];
            s1 += red[(2u * o + 1u) * LANES + l];
        }
        if (row_base + 2u * o < params.rows) {
            rope_store(row_base + 2u * o, s0, s1, rope_pair(row_base + 2u * o));
        }
    }
#else
    for (var o = lid; o < NG * ROWS; o += WG_SIZE) {
        var s = 0.0f;
        for (var l = 0u; l < LANES; l++) {
            s += red[o * LANES + l];
        }
#if GLU_OUT
        y[params.y_offset + row_of(row_base + (o / ROWS) * GH, o % ROWS)] = s;
        outv[o] = s;
#else
        if (row_base + o < params.rows) {
            y[params.y_offset + row_base + o] = s;
        }
#endif
    }
#if GLU_OUT
    workgroupBarrier();
    glu_out(item, lid);
#endif
#endif
}

@compute @workgroup_size(WG_SIZE)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) lid: u32
#if SUBGROUPS
        , @builtin(subgroup_invocation_id) sg_lid: u32, @builtin(subgroup_size) sg_size: u32
#endif
) {
    let item = wg.x + wg.y * params.groups_x;
    if (item >= n_tiles()) {
        return; // uniform across the workgroup
    }
#if SUBGROUPS
    if (sg_size != LANES || sg_lid != lid % LANES) {
        atomicStore(&lay_far, 1u);
    }
#endif
    // 0. the first step's weights (and the norm weight) asked for now, so that their trips to memory overlap
    // the prologue: it only starts the weight streaming after a few barriers (on the H200 the mat-vec lost
    // more time to that wait than the norm's dispatch took)
    let kl = lid % LANES;
    let row0 = tile_row0(item, lid);
    var wpre: array<array<u32, PW>, ROWS>;
    if (PREFETCH != 0 && kl < NK / 64u) {
        for (var r = 0u; r < ROWS; r++) {
            let wb = (params.w_offset + row_of(row0, r) * params.row_stride) / 4u + kl * PW;
            for (var j = 0u; j < PW; j++) {
                wpre[r][j] = w[wb + j];
            }
        }
    }
    var nv: array<vec4<f32>, 2u * IT>;
    for (var it = 0u; it < IT; it++) {
        let c = lid + it * WG_SIZE;
        if (c < CH) {
            nv[2u * it] = nw[params.nw_offset + 2u * c];
            nv[2u * it + 1u] = nw[params.nw_offset + 2u * c + 1u];
        }
    }

#if ROPE_OUT
    // the RoPE of the pair this lane writes at the end (lane l < ROWS / 2 of a row group: rows 2 l, 2 l + 1)
    var rpc = vec3<f32>(0.0);
    if (kl < ROWS / 2u) {
        rpc = rope_pair(row0 + 2u * kl);
    }
#endif

    // 1. h = a (+ b), this invocation's chunks kept in registers, and their sum of squares
    var v: array<vec4<f32>, 2u * IT>;
    var acc = 0.0f;
    for (var it = 0u; it < IT; it++) {
        let c = lid + it * WG_SIZE;
        if (c < CH) {
            for (var j = 0u; j < 2u; j++) {
#if ADD
                let s = a[params.a_offset + 2u * c + j] + b[params.b_offset + 2u * c + j];
                if (item == 0u) {
                    h[params.h_offset + 2u * c + j] = s;
                }
#else
                let s = a[params.a_offset + 2u * c + j];
#endif
                v[2u * it + j] = s;
                acc = fma(s.x, s.x, acc);
                acc = fma(s.y, s.y, acc);
                acc = fma(s.z, s.z, acc);
                acc = fma(s.w, s.w, acc);
            }
        }
    }
#if SUBGROUPS
    let total = wg_sum(acc, lid, sg_lid, sg_size);
#else
    let total = wg_sum(acc, lid);
#endif
    let scale = inverseSqrt(total / f32(NK) + params.eps);

    // 2. x = h * scale * nw, rounded per block of 32 (4 chunks) as actq-quant.wgsl rounds it
    for (var it = 0u; it < IT; it++) {
        let c = lid + it * WG_SIZE;
        if (c < CH) {
            var m = 0.0f;
            for (var j = 0u; j < 2u; j++) {
                let xv = (v[2u * it + j] * scale) * nv[2u * it + j];
                v[2u * it + j] = xv;
                let av = abs(xv);
                m = max(m, max(max(av.x, av.y), max(av.z, av.w)));
            }
            atomicMax(&bmax[c / QB], bitcast<u32>(m));
        }
    }
    workgroupBarrier();
#if KQ
    // Q8_K's scale comes from the super-block's first element of largest |x| (actq.wgsl actq_scale): the
    // chunks holding that magnitude offer their first such element, the earliest one wins and is kept
    for (var it = 0u; it < IT; it++) {
        let c = lid + it * WG_SIZE;
        if (c < CH) {
            let amax = bitcast<f32>(atomicLoad(&bmax[c / QB]));
            for (var e = 0u; e < 8u; e++) {
                if (abs(v[2u * it + e / 4u][e % 4u]) == amax) {
                    atomicMax(&bfirst[c / QB], NK - (8u * c + e));
                    break;
                }
            }
        }
    }
    workgroupBarrier();
    for (var it = 0u; it < IT; it++) {
        let c = lid + it * WG_SIZE;
        if (c < CH) {
            let e = NK - atomicLoad(&bfirst[c / QB]);
            if (e / 8u == c) {
                bsign[c / QB] = v[2u * it + (e % 8u) / 4u][e % 4u];
            }
        }
    }
    workgroupBarrier();
#endif
    for (var it = 0u; it < IT; it++) {
        let c = lid + it * WG_SIZE;
        if (c < CH) {
#if KQ
            let sc = actq_k_scale(bsign[c / QB]);
#else
            let sc = actq_scale_of(bitcast<f32>(atomicLoad(&bmax[c / QB])));
#endif
            let q0 = actq_quant4(v[2u * it], sc);
            let q1 = actq_quant4(v[2u * it + 1u], sc);
            atomicAdd(&bsum[c / 4u], q0.x + q0.y + q0.z + q0.w + q1.x + q1.y + q1.z + q1.w);
            xq[c / 2u][(c % 2u) * 2u] = pack4xI8(q0);
            xq[c / 2u][(c % 2u) * 2u + 1u] = pack4xI8(q1);
        }
    }
    workgroupBarrier();
    for (var blk = lid; blk < NK / 32u; blk += WG_SIZE) {
#if KQ
        let gw = actq_group_words(actq_k_scale(bsign[blk / 8u]), 0.0f, atomicLoad(&bsum[blk]));
#else
        let amax = bitcast<f32>(atomicLoad(&bmax[blk]));
        let gw = actq_group_words(actq_scale_of(amax), amax, atomicLoad(&bsum[blk]));
#endif
        xs[blk / 2u][(blk % 2u) * 2u] = bitcast<f32>(gw.x);
        xs[blk / 2u][(blk % 2u) * 2u + 1u] = bitcast<f32>(gw.y);
    }
#if SUBGROUPS
    if (lid == 0u) {
        lay_far_u = atomicLoad(&lay_far);
    }
    let lay = workgroupUniformLoad(&lay_far_u); // (the barrier before the rows)
#else
    workgroupBarrier();
    let lay = 1u;
#endif
#if TILES
    for (var ti = item; ti < n_tiles(); ti += params.tile_step) {
        var rp = vec3<f32>(0.0);
#if ROPE_OUT
        if (kl < ROWS / 2u) {
            rp = rope_pair(tile_row0(ti, lid) + 2u * kl);
        }
#endif
        rows_tile(ti, lid, lay, rp, wpre);
        workgroupBarrier(); // red and outv are the next tile's
    }
#else
#if ROPE_OUT
    rows_tile(item, lid, lay, rpc, wpre);
#else
    rows_tile(item, lid, lay, vec3<f32>(0.0), wpre);
#endif
#endif
}
