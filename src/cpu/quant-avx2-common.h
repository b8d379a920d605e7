/* AVX2 helpers shared by the x86 quantized kernels (quant-dot-avx2.c, quant-gemv.c). Include inside an
 * x86-64 GCC/clang section after <immintrin.h>; each helper carries its own target attribute, so the
 * including file keeps the baseline ISA. */
#ifndef LW_QUANT_AVX2_COMMON_H
#define LW_QUANT_AVX2_COMMON_H

#include <stdint.h>
#include <string.h>

#define LW_AVX2_FN __attribute__((target("avx2,fma,f16c"))) static inline

/* fp16 -> fp32 in hardware; equals lw__fp16_to_fp32 for every input (NaNs come out quiet in both). */
LW_AVX2_FN float h2f(uint16_t h) {
    return _mm_cvtss_f32(_mm_cvtph_ps(_mm_cvtsi32_si128(h)));
}

/* ggml's hsum8_x86 order: upper half + lower half, then (r0 + r2) + (r1 + r3). */
LW_AVX2_FN float hsum8(__m256 acc) {
    __m128 r = _mm_add_ps(_mm256_extractf128_ps(acc, 1), _mm256_castps256_ps128(acc));
    r = _mm_add_ps(r, _mm_movehl_ps(r, r));
    return _mm_cvtss_f32(_mm_add_ss(r, _mm_movehdup_ps(r)));
}

/* 16 packed nibbles -> 32 bytes: low nibbles first (elements 0..15), then high nibbles (16..31). */
LW_AVX2_FN __m256i nibbles_32(const uint8_t *q) {
    const __m128i t = _mm_loadu_si128((const __m128i *)q);
    const __m256i v = _mm256_set_m128i(_mm_srli_epi16(t, 4), t);
    return _mm256_and_si256(v, _mm256_set1_epi8(0x0f));
}

/* Q4_K/Q5_K's 12 packed bytes -> 8 scales (bytes 0..7) and 8 mins (bytes 8..15), each 6 bits. */
LW_AVX2_FN __m128i k4_scales_mins(const uint8_t *scales) {
    uint32_t u[4];
    memcpy(u, scales, 12);
    const uint32_t m6 = 0x3f3f3f3fu, m4 = 0x0f0f0f0fu, m2 = 0x03030303u;
    u[3] = ((u[2] >> 4) & m4) | (((u[1] >> 6) & m2) << 4); /* mins 4..7  */
    const uint32_t mins_lo = u[1] & m6;                    /* mins 0..3  */
    u[1] = (u[2] & m4) | (((u[0] >> 6) & m2) << 4);        /* scales 4..7 */
    u[2] = mins_lo;
    u[0] &= m6; /* scales 0..3 */
    return _mm_set_epi32((int)u[3], (int)u[2], (int)u[1], (int)u[0]);
}

/* Software prefetch of a weight stream: the cache lines of [p + LW_PF_DIST, p + LW_PF_DIST + n), issued as a
 * kernel consumes the n bytes at p. Why: on the 2-core Xeon (Sapphire Rapids) VMs a one-row-at-a-time Q4_0
 * mat-vec streamed 4.1 GB/s from memory against 12.1 GB/s for a plain 256-bit read loop (and 12 GB/s when
 * the matrix sits in cache): the hardware prefetchers alone kept too few misses in flight for a stream that
 * does ~15 vector instructions per 36 bytes. 2 KiB ahead: 10.1 GB/s (512 B: 6.7, 1 KiB: 8.4, 4 KiB: 9.6);
 * Q8_0 9.2 -> 10-11. Prefetching past the end of a matrix is harmless (a prefetch never faults). */
#ifndef LW_PF_DIST
#define LW_PF_DIST 2048
#endif
#define LW_PF_SPAN(p, n)                                                                                     \
    do {                                                                                                     \
        for (size_t pf_ = 0; pf_ < (size_t)(n); pf_ += 64)                                                   \
            _mm_prefetch((const char *)(p) + LW_PF_DIST + pf_, _MM_HINT_T0);                                 \
    } while (0)

#endif
