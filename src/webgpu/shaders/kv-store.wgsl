// KV cache write (graph op KV_STORE): row r of x (row_len elements of K or V for every KV head) goes to
// cache cell cell0 + r, at cache_offset + (cell0 + r) * row_len elements; F16_CACHE=1 rounds to f16 to
// nearest even (as the CPU's f32_to_f16, bit for bit) and packs two elements per word, F16_CACHE=0
// copies f32, Q8_CACHE=1 quantizes blocks of 32 elements into the GPU's Q8_0 layout (kernels-attn.h: per
// block 8 words of int8 quants, then the scale as f32) with the CPU's quantize_row_q8_0 arithmetic:
// d = amax / 127, q = roundf(x * (1 / d)) (ties away from zero), the scale kept as fp16(d), so the cache
// holds the values the CPU engine's q8_0 cache holds. Q4_CACHE=1 likewise into the GPU's Q4_0 layout (per
// block 4 words of 4-bit quants in element order, then the scale as f32) with quantize_row_q4_0's: the
// element of largest magnitude (the first of equal ones) with its sign, d = max / -8, id = 1 / d,
// q = min(15, trunc(x * id + 8.5)) with x * id rounded before the add, the scale kept as fp16(d).
// One invocation per cache word: two elements (f16) or one (f32); Q8_0 / Q4_0: one per block.
// Defines: F16_CACHE (0/1), Q8_CACHE (0/1), Q4_CACHE (0/1), WG_SIZE (default 256).
// Bindings: 0 x (read_write, f32), 1 cache (read_write: array<u32> of packed halves or Q8_0 / Q4_0 words, or
// array<f32>), 2 params. Dispatch: (groups_x, ceil(groups / groups_x), 1), groups = ceil(rows * words_per_row /
// WG_SIZE).
#include "ops-common.wgsl"
#include "kv-quant.wgsl"
#ifndef F16_CACHE
#define F16_CACHE 0
#endif
#ifndef WG_SIZE
#define WG_SIZE 256
#endif
#if F16_CACHE + Q8_CACHE + Q4_CACHE > 1
#error kv-store: one cache type
#endif

struct KvStoreParams {
    row_len: u32,      // elements per cache row (KV heads x head dim; even for an f16 cache)
    rows: u32,         // rows of x to store
    x_offset: u32,     // first element of x in its binding
    x_stride: u32,     // elements between rows of x
    cache_offset: u32, // element of cell 0 in the cache binding (even for an f16 cache)
    cell0: u32,        // cell of row 0
    groups_x: u32,     // workgroups along x of the grid
    zero: u32,         // 0: the Q4_0 quantizer's unfused() operand (a value the compiler cannot know)
}

@group(0) @binding(0) var<storage, read_write> x: array<f32>;
#if F16_CACHE || Q8_CACHE || Q4_CACHE
@group(0) @binding(1) var<storage, read_write> cache: array<u32>;
#else
@group(0) @binding(1) var<storage, read_write> cache: array<f32>;
#endif
@group(0) @binding(2) var<uniform> params: KvStoreParams;

#if Q8_CACHE || Q4_CACHE
fn kvq_put(w: u32, word: u32) {
    cache[w] = word;
}
fn kvq_zero() -> u32 {
    return params.zero;
}

// Block j (32 elements from element s of x) quantized into the BLOCK_WORDS words from word w of the cache.
fn store_block(s: u32, w: u32) {
    for (var e = 0u; e < 32u; e++) {
        kvq[e] = x[s + e];
    }
    kvq_store(w);
}
#endif

@compute @workgroup_size(WG_SIZE)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let i = (wg.x + wg.y * params.groups_x) * WG_SIZE + lid;
#if F16_CACHE
    let per_row = params.row_len / 2u;
#elif Q8_CACHE || Q4_CACHE
    let per_row = params.row_len / 32u; // blocks
#else
    let per_row = params.row_len;
#endif
    if (i >= params.rows * per_row) {
        return;
    }
    let row = i / per_row;
    let j = i % per_row;
#if Q8_CACHE || Q4_CACHE
    let blk = params.cache_offset / 32u + (params.cell0 + row) * per_row + j; // the block's number
    store_block(params.x_offset + row * params.x_stride + 32u * j, blk * BLOCK_WORDS);
#else
    let dst = params.cache_offset + (params.cell0 + row) * params.row_len;
#if F16_CACHE
    let s = params.x_offset + row * params.x_stride + 2u * j;
    cache[dst / 2u + j] = f16_bits_rne(x[s]) | (f16_bits_rne(x[s + 1u]) << 16u);
#else
    cache[dst + j] = x[params.x_offset + row * params.x_stride + j];
#endif
#endif
}
