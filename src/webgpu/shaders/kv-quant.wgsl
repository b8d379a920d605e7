// The Q8_0 / Q4_0 KV cache quantizers shared by kv-store.wgsl and rope-qkv.wgsl (their cache's blocks, as
// the CPU's quantize_row_q8_0 / quantize_row_q4_0 round them: kv-store.wgsl says how). The includer fills
// kvq (the block's 32 values) and, for a quantized cache, defines kvq_put(w, word) (word w of its cache) and
// kvq_zero() (a 0 the compiler cannot know, for unfused()); kvq_store(w) writes the block's BLOCK_WORDS words
// from word w. Included first: it also gives Q8_CACHE / Q4_CACHE their defaults for the includer.
// Defines: Q8_CACHE (0/1), Q4_CACHE (0/1).
#include "numerics.wgsl"
#ifndef Q8_CACHE
#define Q8_CACHE 0
#endif
#ifndef Q4_CACHE
#define Q4_CACHE 0
#endif

var<private> kvq: array<f32, 32>; // the block's values, before rounding

#if Q8_CACHE
const BLOCK_WORDS: u32 = 9u; // words per block in the cache

// roundf: to nearest, ties away from zero (WGSL's round() ties to even). a - floor(a) is exact, so the
// comparison with 0.5 decides as the CPU's roundf does.
fn round_away(v: f32) -> f32 {
    let a = abs(v);
    let f = floor(a);
    return sign(v) * select(f, f + 1.0, a - f >= 0.5);
}

// kvq quantized into the 9 words from word w of the cache.
fn kvq_store(w: u32) {
    var amax = 0.0f;
    for (var e = 0u; e < 32u; e++) {
        amax = max(amax, abs(kvq[e]));
    }
    let d = div_rn(amax, 127.0f);                       // the CPU's amax / ((1 << 7) - 1)
    let id = select(0.0f, div_rn(1.0f, d), d != 0.0f);  // and its 1.0f / d
    for (var k = 0u; k < 8u; k++) {
        var word = 0u;
        for (var e = 0u; e < 4u; e++) {
            let q = i32(clamp(round_away(kvq[4u * k + e] * id), -128.0, 127.0));
            word |= (bitcast<u32>(q) & 0xffu) << (8u * e);
        }
        kvq_put(w + k, word);
    }
    kvq_put(w + 8u, bitcast<u32>(f16_round(d))); // the block's fp16 scale, widened
}
#endif

#if Q4_CACHE
const BLOCK_WORDS: u32 = 5u; // words per block in the cache

// kvq quantized into the 5 words from word w of the cache.
fn kvq_store(w: u32) {
    var amax = 0.0f;
    var mx = 0.0f; // the element of largest magnitude, with its sign
    for (var e = 0u; e < 32u; e++) {
        let v = kvq[e];
        if (amax < abs(v)) { // strictly: the first of equal magnitudes, as on the CPU
            amax = abs(v);
            mx = v;
        }
    }
    let d = mx * -0.125f;                               // the CPU's max / -8 (exact either way)
    let id = select(0.0f, div_rn(1.0f, d), d != 0.0f);  // and its 1.0f / d
    for (var k = 0u; k < 4u; k++) {
        var word = 0u;
        for (var e = 0u; e < 8u; e++) {
            // the CPU rounds x * id on its own before adding 8.5; fused into one fma the sum could land on
            // the other side of an integer. x * id lies in [-8, 8] (id = -8 / max), so the sum is at least
            // 0.5 and trunc is floor. (A block whose 1 / d overflows has fp16(d) = 0: zeros whatever the
            // quants, on both engines.)
            let t = unfused(kvq[8u * k + e] * id, kvq_zero()) + 8.5f;
            word |= u32(clamp(t, 0.0f, 15.0f)) << (4u * e);
        }
        kvq_put(w + k, word);
    }
    kvq_put(w + 4u, bitcast<u32>(f16_round(d))); // the block's fp16 scale, widened
}
#endif
