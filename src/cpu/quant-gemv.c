/* Fast decode products (quant-gemv.h): x86 versions chosen at run time (AVX-512 VNNI on 512-bit registers
 * for Q4_0/Q8_0/Q4_K/Q6_K, the same on 256-bit registers for Q4_0/Q8_0, AVX2 for Q4_0/Q8_0/Q4_K/Q6_K); the
 * wasm simd128 versions live in quant-gemv-wasm.c.
 *
 * Shape of every kernel: one weight row at a time (Q4_0 on 256-bit registers: four, Q4_0_ROWS4), front to
 * back, so a thread's share (one contiguous range of rows, laid out one after another in the file) is one
 * sequential stream, prefetched LW_PF_DIST bytes ahead in software (quant-avx2-common.h: 2.5x for Q4_0 on
 * Xeon VMs; 512 bytes ahead had measured no better on a Zen 4 EPYC). (Interleaving 4 rows block by block, so
 * that the activation block is loaded once for all four, measured 2x slower on a whole-memory stream while
 * each of the four streams 1 KiB apart was prefetched on its own; Q4_0_ROWS4 pays because it prefetches the
 * four rows' contiguous range as one stream.) Per block: the exact integer block sum in int32
 * lanes, turned into float and fused-multiply-added with the block's scale into float lanes; the lanes are
 * summed once per row. The activation's per-block share (its scale, Q4_0's -8 * sum lanes, the pair or
 * sub-block order of its quants) is formed once per call, on the stack.
 *
 * Built with per-function target attributes, so the library keeps the baseline ISA. */
#include "cpu/quant-gemv.h"

#include <stdlib.h>
#include <string.h>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))

#include <cpuid.h>
#include <immintrin.h>

#define AVX2   __attribute__((target("avx2,fma,f16c")))
#define VNNI   __attribute__((target("avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")))
#define INLINE inline __attribute__((always_inline))

#include "cpu/quant-avx2-common.h"

/* Activation blocks whose per-block share is prepared once per call (on the stack); longer rows form it per
 * row and block. 512 blocks of 32 = rows up to 16384 wide. */
#define ACT_CACHE 512

/* fp16 h widened and broadcast to 8 lanes. */
AVX2 static INLINE __m256 h2f8(uint16_t h) {
    return _mm256_cvtph_ps(_mm_set1_epi16((short)h));
}

/* Unsigned bytes u times signed bytes s, 4 per int32 lane, added to acc: one vpdpbusd with VNNI, maddubs +
 * madd + add without (callers keep each pair's sum within int16: u <= 128, and u < 128 where s = -128). */
VNNI static INLINE __m256i dot_us_vnni(__m256i acc, __m256i u, __m256i s) {
    return _mm256_dpbusd_epi32(acc, u, s);
}
AVX2 static INLINE __m256i dot_us_avx2(__m256i acc, __m256i u, __m256i s) {
    return _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1)));
}

/* -8 * the sums of each 4 quants of activation block y (Q4_0's offset), per int32 lane. */
#define NEG8(DOT, y)                                                                                         \
    _mm256_sub_epi32(_mm256_setzero_si256(), DOT(_mm256_setzero_si256(), _mm256_set1_epi8(8),                \
                                                 _mm256_loadu_si256((const __m256i *)(y).qs)))

/* ---------------------------------------------------------------------------------------------------------
 * Q4_0: sum (q - 8) * y = sum q * y - 8 * sum y; the -8 * sum y lanes are the start value of the product.
 * Q8_0: |w| times y with w's sign.
 * ------------------------------------------------------------------------------------------------------- */

#define Q4_0_STEP(DOT, xb, yb, neg, dy, acc)                                                                 \
    acc = _mm256_fmadd_ps(                                                                                   \
        _mm256_cvtepi32_ps(DOT(neg, nibbles_32((xb).qs), _mm256_loadu_si256((const __m256i *)(yb).qs))),     \
        _mm256_mul_ps(h2f8((xb).d), _mm256_set1_ps(dy)), acc)

#define Q8_0_STEP(DOT, xb, yb, neg, dy, acc)                                                                 \
    {                                                                                                        \
        const __m256i q_ = _mm256_loadu_si256((const __m256i *)(xb).qs);                                     \
        const __m256i y_ = _mm256_loadu_si256((const __m256i *)(yb).qs);                                     \
        (void)(neg);                                                                                         \
        acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(DOT(_mm256_setzero_si256(), _mm256_sign_epi8(q_, q_),       \
                                                     _mm256_sign_epi8(y_, q_))),                             \
                              _mm256_mul_ps(h2f8((xb).d), _mm256_set1_ps(dy)), acc);                         \
    }

/* Row after row, each read front to back (two accumulators for two FMA chains); the activation's per-block
 * share (scale, Q4_0's offset lanes) formed once per call when the row fits ACT_CACHE, else per block. */
#define ROWS_32(BLOCK, STEP, DOT, OFFSET)                                                                    \
    const int64_t nb = k / 32;                                                                               \
    const lw__block_q8_0 *y = a;                                                                             \
    const int cached = nb <= ACT_CACHE;                                                                      \
    __m256i neg[ACT_CACHE];                                                                                  \
    float dy[ACT_CACHE];                                                                                     \
    if (cached)                                                                                              \
        for (int64_t b = 0; b < nb; b++)                                                                     \
            neg[b] = OFFSET ? NEG8(DOT, y[b]) : _mm256_setzero_si256(), dy[b] = h2f(y[b].d);                 \
    for (int64_t r = 0; r < m; r++) {                                                                        \
        const BLOCK *x = (const BLOCK *)((const uint8_t *)w + (size_t)r * ws);                               \
        __m256 acc0 = _mm256_setzero_ps(), acc1 = acc0;                                                      \
        int64_t b = 0;                                                                                       \
        if (cached) {                                                                                        \
            for (; b + 2 <= nb; b += 2) {                                                                    \
                LW_PF_SPAN(&x[b], 2 * sizeof(BLOCK));                                                        \
                STEP(DOT, x[b], y[b], neg[b], dy[b], acc0);                                                  \
                STEP(DOT, x[b + 1], y[b + 1], neg[b + 1], dy[b + 1], acc1);                                  \
            }                                                                                                \
            for (; b < nb; b++) STEP(DOT, x[b], y[b], neg[b], dy[b], acc0);                                  \
        } else {                                                                                             \
            for (; b < nb; b++) {                                                                            \
                LW_PF_SPAN(&x[b], sizeof(BLOCK));                                                            \
                STEP(DOT, x[b], y[b], OFFSET ? NEG8(DOT, y[b]) : _mm256_setzero_si256(), h2f(y[b].d), acc0); \
            }                                                                                                \
        }                                                                                                    \
        c[r] = hsum8(_mm256_add_ps(acc0, acc1));                                                             \
    }

/* Q4_0, four rows a step (rows up to ACT_CACHE blocks; longer ones and the last m % 4 rows take ROWS_32).
 * Why: one row at a time spends six multiply-pipe operations per block (maddubs, madd, the int -> float
 * conversion, the scale's f16 conversion, its product with the activation's scale, the fma) and four more
 * to unpack the nibbles, so the 1B's Q4_0 decode on one AVX2 core (Zen) streamed ~9 GB/s against a 22 GB/s
 * read ceiling: bound by those pipes, not by memory. Here rows r0 and r2 (r1 and r3) share one register,
 * one in each 128-bit half, so one and / shift / and unpacks two rows' nibbles, and the activation block's
 * elements 0..15 (and 16..31) are loaded into both halves (ylo, yhi: one vbroadcasti128 each, from the
 * activation itself: a prepared copy measured the same and took 32 KiB of stack); AVX2 adds the two
 * maddubs' int16 sums before one madd. One hadd leaves two partial sums per row, [r0, r0, r1, r1 | r2, r2,
 * r3, r3], against which the four scales (times the activation's) are laid out: one conversion, one f16
 * conversion, one product and one fma per block for four rows. Q4_0's -8 * sum(y) is added in the first
 * lane of each row. Prefetch: the four rows are one contiguous range (4 ws bytes), so each block step
 * prefetches the same share of the next quad's range (LW_PF4_QUADS quads ahead, 72 bytes a block);
 * with LW_PF_SPAN 2 KiB ahead of each of the four streams instead, the whole 1B decode ran slower than one
 * row at a time (14.3 vs 17.7 tok/s). Measured on a 2-core Zen EPYC, llama-3.2-1b Q4_0 decode, alternating
 * (`llamaweb bench -m llama-3.2-1b-q4_0.gguf -t T -p 16 -n 32 -r 2`): 1 thread 17.7 -> 20.5 tok/s, 2
 * threads 29.1 -> 33.4 (test-quant-gemv's 4096 x 64 in cache: 11.7 -> 8.8 us). */
#ifndef LW_PF4_QUADS
#define LW_PF4_QUADS 1
#endif
/* Two rows' products of one block, rows r (low 128 bits) and r' (high): u_lo / u_hi their low / high nibbles
 * (elements 0..15 / 16..31), y_lo / y_hi the activation's elements 0..15 / 16..31 in both halves; 4 int32
 * partial sums per row. AVX2: the two maddubs' int16 pair sums added before one madd (each <= 4 * 15 * 128,
 * within int16). */
AVX2 static INLINE __m256i dot2_avx2(__m256i ulo, __m256i ylo, __m256i uhi, __m256i yhi) {
    return _mm256_madd_epi16(_mm256_add_epi16(_mm256_maddubs_epi16(ulo, ylo), _mm256_maddubs_epi16(uhi, yhi)),
                             _mm256_set1_epi16(1));
}
VNNI static INLINE __m256i dot2_vnni(__m256i ulo, __m256i ylo, __m256i uhi, __m256i yhi) {
    return _mm256_dpbusd_epi32(_mm256_dpbusd_epi32(_mm256_setzero_si256(), ulo, ylo), uhi, yhi);
}

/* One block of the quad: [r0, r0, r1, r1 | r2, r2, r3, r3], two partial integer sums per row (no offset). */
#define Q4_0_QUAD(DOT2, x0, x1, x2, x3, yb, m4)                                                              \
    _mm256_hadd_epi32(DOT2(_mm256_and_si256(LOAD2(x2, x0), m4), YLO(yb),                                     \
                           _mm256_and_si256(_mm256_srli_epi16(LOAD2(x2, x0), 4), m4), YHI(yb)),              \
                      DOT2(_mm256_and_si256(LOAD2(x3, x1), m4), YLO(yb),                                     \
                           _mm256_and_si256(_mm256_srli_epi16(LOAD2(x3, x1), 4), m4), YHI(yb)))
#define LOAD2(hi, lo)                                                                                        \
    _mm256_set_m128i(_mm_loadu_si128((const __m128i *)(hi).qs), _mm_loadu_si128((const __m128i *)(lo).qs))
#define YLO(yb) _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)(yb).qs))
#define YHI(yb) _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)((yb).qs + 16)))
/* Two fp16 scales side by side, as the low and high 16 bits of a 32-bit word. */
#define D2(p, q) ((uint64_t)(p).d | (uint64_t)(q).d << 16)

/* Two blocks b, b1 a step: a second hadd of the two blocks' [r0, r0, r1, r1 | ...] leaves every block sum
 * whole, [r0, r1, r0', r1' | r2, r3, r2', r3'] (' = block b1), against which the eight scales are one
 * 128-bit word of fp16 (built with scalar shifts and ors, off the vector pipes: the four vpinsrw a block had
 * taken were the hottest spot in perf), one conversion, one product with the activation's prepared
 * [dy, dy, dy', dy'] and one fma for two blocks of four rows. The odd last block takes b1 = b with that
 * block's activation scale and offset zeroed in the prepared pair. test-quant-gemv's 4096 x 64 in cache:
 * 8.8 -> 7.4 us; the whole 1B's decode on one core +2 % (within the noise: it waits on memory there). */
#define Q4_0_ROWS4(DOT, DOT2)                                                                                \
    const int64_t nb = k / 32, np = (nb + 1) / 2;                                                            \
    const lw__block_q8_0 *y = a;                                                                             \
    int64_t r0 = 0;                                                                                          \
    if (nb <= ACT_CACHE && m >= 4) {                                                                         \
        __m256i off[ACT_CACHE / 2];                                                                          \
        float dy[ACT_CACHE / 2][4];                                                                          \
        for (int64_t p = 0; p < np; p++) {                                                                   \
            int o[2] = {0, 0};                                                                               \
            float d[2] = {0.0f, 0.0f};                                                                       \
            for (int h = 0; h < 2 && 2 * p + h < nb; h++) {                                                  \
                for (int i = 0; i < 32; i++) o[h] += y[2 * p + h].qs[i];                                     \
                o[h] *= -8, d[h] = h2f(y[2 * p + h].d);                                                      \
            }                                                                                                \
            off[p] = _mm256_setr_epi32(o[0], o[0], o[1], o[1], o[0], o[0], o[1], o[1]);                      \
            dy[p][0] = dy[p][1] = d[0], dy[p][2] = dy[p][3] = d[1];                                          \
        }                                                                                                    \
        const __m256i m4 = _mm256_set1_epi8(0x0f);                                                           \
        for (; r0 + 4 <= m; r0 += 4) {                                                                       \
            const lw__block_q4_0 *x0 = (const lw__block_q4_0 *)((const uint8_t *)w + (size_t)r0 * ws),       \
                                 *x1 = (const lw__block_q4_0 *)((const uint8_t *)x0 + ws),                   \
                                 *x2 = (const lw__block_q4_0 *)((const uint8_t *)x0 + 2 * ws),               \
                                 *x3 = (const lw__block_q4_0 *)((const uint8_t *)x0 + 3 * ws);               \
            const char *pf = (const char *)x0 + LW_PF4_QUADS * 4 * ws;                                       \
            __m256 acc = _mm256_setzero_ps();                                                                \
            for (int64_t p = 0; p < np; p++) {                                                               \
                const int64_t b = 2 * p, b1 = b + 1 < nb ? b + 1 : b;                                        \
                _mm_prefetch(pf, _MM_HINT_T0);                                                               \
                _mm_prefetch(pf + 64, _MM_HINT_T0);                                                          \
                _mm_prefetch(pf + 128, _MM_HINT_T0);                                                         \
                pf += 8 * sizeof(lw__block_q4_0);                                                            \
                const __m256i h0 = Q4_0_QUAD(DOT2, x0[b], x1[b], x2[b], x3[b], y[b], m4);                    \
                const __m256i h1 = Q4_0_QUAD(DOT2, x0[b1], x1[b1], x2[b1], x3[b1], y[b1], m4);               \
                const __m256i s = _mm256_add_epi32(_mm256_hadd_epi32(h0, h1), off[p]);                       \
                const __m256 d8 = _mm256_cvtph_ps(                                                           \
                    _mm_set_epi64x((long long)(D2(x2[b], x3[b]) | D2(x2[b1], x3[b1]) << 32),                 \
                                   (long long)(D2(x0[b], x1[b]) | D2(x0[b1], x1[b1]) << 32)));               \
                acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s),                                                 \
                                      _mm256_mul_ps(d8, _mm256_broadcast_ps((const __m128 *)dy[p])), acc);   \
            }                                                                                                \
            const __m128 lo = _mm256_castps256_ps128(acc), hi = _mm256_extractf128_ps(acc, 1);               \
            _mm_storeu_ps(c + r0, _mm_add_ps(_mm_shuffle_ps(lo, hi, _MM_SHUFFLE(1, 0, 1, 0)),                \
                                             _mm_shuffle_ps(lo, hi, _MM_SHUFFLE(3, 2, 3, 2))));              \
        }                                                                                                    \
    }                                                                                                        \
    w = (const uint8_t *)w + (size_t)r0 * ws, m -= r0, c += r0;                                              \
    { ROWS_32(lw__block_q4_0, Q4_0_STEP, DOT, 1) }

AVX2 static void gemv_q4_0_avx2(int64_t k, const void *w, size_t ws, int64_t m, const void *a, float *c) {
    Q4_0_ROWS4(dot_us_avx2, dot2_avx2);
}
VNNI static void gemv_q4_0_vnni(int64_t k, const void *w, size_t ws, int64_t m, const void *a, float *c) {
    Q4_0_ROWS4(dot_us_vnni, dot2_vnni);
}
AVX2 static void gemv_q8_0_avx2(int64_t k, const void *w, size_t ws, int64_t m, const void *a, float *c) {
    ROWS_32(lw__block_q8_0, Q8_0_STEP, dot_us_avx2, 0);
}
VNNI static void gemv_q8_0_vnni(int64_t k, const void *w, size_t ws, int64_t m, const void *a, float *c) {
    ROWS_32(lw__block_q8_0, Q8_0_STEP, dot_us_vnni, 0);
}

/* ---------------------------------------------------------------------------------------------------------
 * Q4_0 / Q8_0 on 512-bit registers (AVX-512 VNNI): two blocks per step, the products as |y| (unsigned) times
 * the weight with y's sign (a masked negation). The activation is prepared once per call in pair order: |y|
 * as a zmm of [y_b 0..15, y_b+1 0..15, y_b 16..31, y_b+1 16..31] (Q4_0: where the nibbles of the two blocks
 * land) or [y_b, y_b+1] (Q8_0), the mask of its negative quants and its two scales: 80 bytes per pair, so
 * the prepared row of an 8192-wide product (10 KiB) stays in L1 beside the streaming weights (a first
 * version kept 192 bytes per pair, offset and scale lanes included, and ran 8192-wide rows ~30 % slower).
 * ------------------------------------------------------------------------------------------------------- */

#define AVX512 __attribute__((target("avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")))

/* Block pairs prepared per call on the stack: rows up to 8192 wide; wider ones take the 256-bit kernel. */
#define PAIR_CACHE 128

/* [lo, hi] as one 512-bit register. */
AVX512 static INLINE __m512i cat256(__m256i lo, __m256i hi) {
    return _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
}

/* One row's prepared activation. */
typedef struct act_pairs {
    __m512i ya[PAIR_CACHE];    /* |y| of each pair, in the kernel's order (|-128| = 128 as unsigned) */
    __mmask64 neg[PAIR_CACHE]; /* lanes of ya whose y is negative                                    */
    float d[2 * PAIR_CACHE];   /* the activation scales of blocks 2i and 2i + 1                       */
} act_pairs;

#define IDX_Q4_0 _mm512_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 1, 1)
#define IDX_Q8_0 _mm512_setr_epi32(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1)

AVX512 static void prepare_pairs(const lw__block_q8_0 *y, int64_t np, int q4, act_pairs *p) {
    for (int64_t i = 0; i < np; i++) {
        const lw__block_q8_0 *y0 = &y[2 * i], *y1 = &y[2 * i + 1];
        __m512i q;
        if (q4)
            q = cat256(_mm256_set_m128i(_mm_loadu_si128((const __m128i *)y1->qs),
                                        _mm_loadu_si128((const __m128i *)y0->qs)),
                       _mm256_set_m128i(_mm_loadu_si128((const __m128i *)(y1->qs + 16)),
                                        _mm_loadu_si128((const __m128i *)(y0->qs + 16))));
        else
            q = cat256(_mm256_loadu_si256((const __m256i *)y0->qs),
                       _mm256_loadu_si256((const __m256i *)y1->qs));
        p->ya[i] = _mm512_abs_epi8(q);
        p->neg[i] = _mm512_movepi8_mask(q);
        p->d[2 * i] = h2f(y0->d);
        p->d[2 * i + 1] = h2f(y1->d);
    }
}

/* The weights of blocks x[0], x[1] in the pair order as signed bytes (Q4_0: nibble - 8). */
AVX512 static INLINE __m512i pair_quants(const uint8_t *x, int q4) {
    if (q4) {
        const lw__block_q4_0 *b = (const lw__block_q4_0 *)x;
        const __m256i t = _mm256_set_m128i(_mm_loadu_si128((const __m128i *)b[1].qs),
                                           _mm_loadu_si128((const __m128i *)b[0].qs));
        return _mm512_sub_epi8(_mm512_and_si512(cat256(t, _mm256_srli_epi16(t, 4)), _mm512_set1_epi8(0x0f)),
                               _mm512_set1_epi8(8));
    }
    const lw__block_q8_0 *b = (const lw__block_q8_0 *)x;
    return cat256(_mm256_loadu_si256((const __m256i *)b[0].qs), _mm256_loadu_si256((const __m256i *)b[1].qs));
}

/* acc + the two blocks at xb (bs bytes each; both formats start with their fp16 scale) times pair i. */
AVX512 static INLINE __m512 pair_step(const uint8_t *xb, size_t bs, const act_pairs *p, int64_t i,
                                      __m512i idx, int q4, __m512 acc) {
    uint16_t d0, d1;
    memcpy(&d0, xb, 2);
    memcpy(&d1, xb + bs, 2);
    const __m512i v = pair_quants(xb, q4);
    const __m512i sv = _mm512_mask_sub_epi8(v, p->neg[i], _mm512_setzero_si512(), v); /* v with y's sign */
    const __m512i s = _mm512_dpbusd_epi32(_mm512_setzero_si512(), p->ya[i], sv);
    /* the two blocks' weight scale x activation scale, then spread over their lanes */
    const __m128 dd = _mm_mul_ps(_mm_cvtph_ps(_mm_insert_epi16(_mm_cvtsi32_si128(d0), d1, 1)),
                                 _mm_castpd_ps(_mm_load_sd((const double *)&p->d[2 * i])));
    return _mm512_fmadd_ps(_mm512_cvtepi32_ps(s), _mm512_permutexvar_ps(idx, _mm512_castps128_ps512(dd)),
                           acc);
}

/* Q4_0 (q4 = 1) or Q8_0 rows, two blocks per step. Returns 0 when the row does not fit the cache (or has an
 * odd block count): the caller takes the 256-bit kernel then. Q8_0 weights must not hold -128 (ggml's
 * quantizer writes -127..127): its negation would wrap. */
AVX512 static INLINE int pairs_rows(int64_t k, const void *w, size_t ws, int64_t m, const void *a, float *c,
                                    int q4) {
    const int64_t nb = k / 32, np = nb / 2;
    const size_t bs = q4 ? sizeof(lw__block_q4_0) : sizeof(lw__block_q8_0);
    if (np > PAIR_CACHE || nb % 2) return 0;
    act_pairs pr;
    prepare_pairs(a, np, q4, &pr);
    const __m512i idx = q4 ? IDX_Q4_0 : IDX_Q8_0;
    for (int64_t r = 0; r < m; r++) {
        const uint8_t *x = (const uint8_t *)w + (size_t)r * ws;
        __m512 acc0 = _mm512_setzero_ps(), acc1 = acc0; /* two FMA chains */
        for (int64_t i = 0; i < np; i += 2) {
            LW_PF_SPAN(x + (size_t)(2 * i) * bs, 4 * bs);
            acc0 = pair_step(x + (size_t)(2 * i) * bs, bs, &pr, i, idx, q4, acc0);
            if (i + 1 < np) acc1 = pair_step(x + (size_t)(2 * i + 2) * bs, bs, &pr, i + 1, idx, q4, acc1);
        }
        c[r] = _mm512_reduce_add_ps(_mm512_add_ps(acc0, acc1));
    }
    return 1;
}

AVX512 static void gemv_q4_0_avx512(int64_t k, const void *w, size_t ws, int64_t m, const void *a, float *c) {
    if (!pairs_rows(k, w, ws, m, a, c, 1)) gemv_q4_0_vnni(k, w, ws, m, a, c);
}

AVX512 static void gemv_q8_0_avx512(int64_t k, const void *w, size_t ws, int64_t m, const void *a, float *c) {
    if (!pairs_rows(k, w, ws, m, a, c, 0)) gemv_q8_0_vnni(k, w, ws, m, a, c);
}

/* ---------------------------------------------------------------------------------------------------------
 * Q4_K: per sub-block of 32, maddubs of the nibbles with y, times the sub-block's 6-bit scale (madd with
 * the scale broadcast: int32 lanes); the mins through the activation's sums of 16.
 * ------------------------------------------------------------------------------------------------------- */

/* int16 lane j of v (8 lanes, both 128-bit halves equal) broadcast to all 16 lanes. */
#define BCAST16(v, j) _mm256_shuffle_epi8(v, _mm256_set1_epi16((short)(((2 * (j) + 1) << 8) | (2 * (j)))))

/* Integer lanes of one row's super-block: sum over sub-blocks of sc * (q . y), in 8 int32 lanes. */
AVX2 static INLINE __m256i q4_K_lanes(const uint8_t *qs, const int8_t *yq, __m256i sc) {
    const __m256i m4 = _mm256_set1_epi8(0x0f);
    __m256i sum = _mm256_setzero_si256();
#define Q4K_STEP(j)                                                                                          \
    {                                                                                                        \
        const __m256i q = _mm256_loadu_si256((const __m256i *)(qs + 32 * (j)));                              \
        const __m256i p0 = _mm256_maddubs_epi16(_mm256_and_si256(q, m4),                                     \
                                                _mm256_loadu_si256((const __m256i *)(yq + 64 * (j))));       \
        const __m256i p1 = _mm256_maddubs_epi16(_mm256_and_si256(_mm256_srli_epi16(q, 4), m4),               \
                                                _mm256_loadu_si256((const __m256i *)(yq + 64 * (j) + 32)));  \
        sum = _mm256_add_epi32(sum, _mm256_add_epi32(_mm256_madd_epi16(p0, BCAST16(sc, 2 * (j))),            \
                                                     _mm256_madd_epi16(p1, BCAST16(sc, 2 * (j) + 1))));      \
    }
    Q4K_STEP(0)
    Q4K_STEP(1)
    Q4K_STEP(2)
    Q4K_STEP(3)
#undef Q4K_STEP
    return sum;
}

/* One row's super-block b into acc (scale lanes) and accm (min lanes). */
AVX2 static INLINE void q4_K_block(const lw__block_q4_K *x, const lw__block_q8_K *y, __m128i ypair,
                                   __m256 *acc, __m128 *accm) {
    const __m128i sm = k4_scales_mins(x->scales);
    const __m256i sc = _mm256_broadcastsi128_si256(_mm_cvtepu8_epi16(sm));
    const __m128i mins = _mm_madd_epi16(_mm_cvtepu8_epi16(_mm_srli_si128(sm, 8)), ypair);
    const __m256i s = q4_K_lanes(x->qs, y->qs, sc);
    *acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s), _mm256_set1_ps(h2f(x->d) * y->d), *acc);
    *accm = _mm_fmadd_ps(_mm_cvtepi32_ps(mins), _mm_set1_ps(-h2f(x->dmin) * y->d), *accm);
}

AVX2 static INLINE float q4_K_total(__m256 acc, __m128 accm) {
    return hsum8(_mm256_add_ps(acc, _mm256_insertf128_ps(_mm256_setzero_ps(), accm, 0)));
}

AVX2 static void gemv_q4_K_avx2(int64_t k, const void *w, size_t ws, int64_t m, const void *a, float *c) {
    const int64_t nb = k / 256;
    const lw__block_q8_K *y = a;
    for (int64_t r = 0; r < m; r++) {
        const lw__block_q4_K *x = (const lw__block_q4_K *)((const uint8_t *)w + (size_t)r * ws);
        __m256 acc = _mm256_setzero_ps();
        __m128 accm = _mm_setzero_ps();
        for (int64_t b = 0; b < nb; b++) {
            const __m128i ypair = _mm_hadd_epi16(_mm_loadu_si128((const __m128i *)y[b].bsums),
                                                 _mm_loadu_si128((const __m128i *)(y[b].bsums + 8)));
            LW_PF_SPAN(&x[b], sizeof(lw__block_q4_K));
            q4_K_block(&x[b], &y[b], ypair, &acc, &accm);
        }
        c[r] = q4_K_total(acc, accm);
    }
}

/* Q4_K on 512-bit registers: 64 bytes of quants per step, the low nibbles holding sub-blocks 4j and 4j + 2
 * and the high ones 4j + 1 and 4j + 3 (j = 0, 1); the activation's quants are reordered to match once per
 * call, the sub-block scales spread over their 32 int16 lanes by one vpermw each, and vpdpwssd adds the
 * scaled pair sums into 16 int32 lanes. */

/* Super-blocks prepared per call on the stack (256 bytes each, 8 KiB): rows up to 8192 wide. */
#define K_CACHE 32

AVX512 static void gemv_q4_K_avx512(int64_t k, const void *w, size_t ws, int64_t m, const void *a, float *c) {
    const int64_t nb = k / 256;
    const lw__block_q8_K *y = a;
    if (nb > K_CACHE) {
        gemv_q4_K_avx2(k, w, ws, m, a, c);
        return;
    }
    __m512i yr[K_CACHE][4]; /* [2j]: elements of the low nibbles of step j, [2j + 1]: of the high ones */
    __m128i ypair[K_CACHE];
    for (int64_t b = 0; b < nb; b++) {
        const int8_t *q = y[b].qs;
        for (int j = 0; j < 2; j++) {
            const int8_t *p = q + 128 * j;
            yr[b][2 * j] =
                cat256(_mm256_loadu_si256((const __m256i *)p), _mm256_loadu_si256((const __m256i *)(p + 64)));
            yr[b][2 * j + 1] = cat256(_mm256_loadu_si256((const __m256i *)(p + 32)),
                                      _mm256_loadu_si256((const __m256i *)(p + 96)));
        }
        ypair[b] = _mm_hadd_epi16(_mm_loadu_si128((const __m128i *)y[b].bsums),
                                  _mm_loadu_si128((const __m128i *)(y[b].bsums + 8)));
    }
    /* int16 lane i of the scale vector of (step j, nibble h) = scale of sub-block 4j + h + 2 * (i >= 16) */
    const __m512i i00 = _mm512_set_epi16(2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 0, 0, 0, 0, 0, 0, 0,
                                         0, 0, 0, 0, 0, 0, 0, 0, 0);
    const __m512i one = _mm512_set1_epi16(1);
    const __m512i m4 = _mm512_set1_epi8(0x0f);
    for (int64_t r = 0; r < m; r++) {
        const lw__block_q4_K *x = (const lw__block_q4_K *)((const uint8_t *)w + (size_t)r * ws);
        __m512 acc = _mm512_setzero_ps();
        __m128 accm = _mm_setzero_ps();
        for (int64_t b = 0; b < nb; b++) {
            LW_PF_SPAN(&x[b], sizeof(lw__block_q4_K));
            const __m128i sm = k4_scales_mins(x[b].scales);
            const __m512i sc = _mm512_castsi128_si512(_mm_cvtepu8_epi16(sm)); /* 8 scales as int16 */
            __m512i sum = _mm512_setzero_si512();
            for (int j = 0; j < 2; j++) {
                const __m512i qv = _mm512_loadu_si512((const void *)(x[b].qs + 64 * j));
                const __m512i lo = _mm512_and_si512(qv, m4),
                              hi = _mm512_and_si512(_mm512_srli_epi16(qv, 4), m4);
                const __m512i idx = _mm512_add_epi16(i00, _mm512_set1_epi16((short)(4 * j)));
                sum = _mm512_dpwssd_epi32(sum, _mm512_maddubs_epi16(lo, yr[b][2 * j]),
                                          _mm512_permutexvar_epi16(idx, sc));
                sum = _mm512_dpwssd_epi32(sum, _mm512_maddubs_epi16(hi, yr[b][2 * j + 1]),
                                          _mm512_permutexvar_epi16(_mm512_add_epi16(idx, one), sc));
            }
            acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sum), _mm512_set1_ps(h2f(x[b].d) * y[b].d), acc);
            const __m128i mins = _mm_madd_epi16(_mm_cvtepu8_epi16(_mm_srli_si128(sm, 8)), ypair[b]);
            accm = _mm_fmadd_ps(_mm_cvtepi32_ps(mins), _mm_set1_ps(-h2f(x[b].dmin) * y[b].d), accm);
        }
        c[r] = _mm512_reduce_add_ps(acc) + ((accm[0] + accm[2]) + (accm[1] + accm[3]));
    }
}

/* ---------------------------------------------------------------------------------------------------------
 * Q6_K
 * ------------------------------------------------------------------------------------------------------- */

/* Q6_K on AVX2, one row at a time with LW_PF_SPAN ahead of it. Why: without a kernel here the engine took
 * the exact x86-order dot (quant-dot-avx2.c) row by row with no software prefetch, and Q4_K_M's Q6_K
 * tensors (output head, half the V and down projections) took ~24 % of its decode on one Zen 3 core for
 * ~19 % of the bytes. Per half of 128: the 2 high bits of the four 32-element chunks come from the qh bytes
 * shifted to bits 4..5 and masked (one shift and one and each: no bits cross a byte, the shifts are <= 4);
 * the sub-block scales are reordered once per block, even ones in the low 128 bits and odd ones in the high,
 * so one vpshufb gives a chunk's two scales (one per 16 elements, one per half); the -32 offset through the
 * activation's sums of 16. */
AVX2 static void gemv_q6_K_avx2(int64_t k, const void *w, size_t ws, int64_t m, const void *a, float *c) {
    const int64_t nb = k / 256;
    const lw__block_q8_K *y = a;
    const __m256i m4 = _mm256_set1_epi8(0x0f), m30 = _mm256_set1_epi8(0x30);
    const __m128i eo = _mm_setr_epi8(0, 2, 4, 6, 8, 10, 12, 14, 1, 3, 5, 7, 9, 11, 13, 15);
    for (int64_t r = 0; r < m; r++) {
        const lw__block_q6_K *x = (const lw__block_q6_K *)((const uint8_t *)w + (size_t)r * ws);
        __m256 acc = _mm256_setzero_ps();
        for (int64_t b = 0; b < nb; b++) {
            LW_PF_SPAN(&x[b], sizeof(lw__block_q6_K));
            const __m128i sc8 = _mm_loadu_si128((const __m128i *)x[b].scales);
            const __m256i sc = _mm256_cvtepi8_epi16(_mm_shuffle_epi8(sc8, eo)); /* [even | odd] scales */
            __m256i sum = _mm256_setzero_si256();
            for (int h = 0; h < 2; h++) {
                const __m256i l0 = _mm256_loadu_si256((const __m256i *)(x[b].ql + 64 * h));
                const __m256i l1 = _mm256_loadu_si256((const __m256i *)(x[b].ql + 64 * h + 32));
                const __m256i hb = _mm256_loadu_si256((const __m256i *)(x[b].qh + 32 * h));
                const __m256i u[4] = {_mm256_or_si256(_mm256_and_si256(l0, m4),
                                                      _mm256_and_si256(_mm256_slli_epi16(hb, 4), m30)),
                                      _mm256_or_si256(_mm256_and_si256(l1, m4),
                                                      _mm256_and_si256(_mm256_slli_epi16(hb, 2), m30)),
                                      _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l0, 4), m4),
                                                      _mm256_and_si256(hb, m30)),
                                      _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l1, 4), m4),
                                                      _mm256_and_si256(_mm256_srli_epi16(hb, 2), m30))};
                for (int j = 0; j < 4; j++) { /* chunk j: scales 8h + 2j (low half), 8h + 2j + 1 (high) */
                    const __m256i q8 = _mm256_loadu_si256((const __m256i *)(y[b].qs + 128 * h + 32 * j));
                    sum = _mm256_add_epi32(
                        sum, _mm256_madd_epi16(_mm256_maddubs_epi16(u[j], q8), BCAST16(sc, 4 * h + j)));
                }
            }
            const __m256i corr =
                _mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)y[b].bsums), _mm256_cvtepi8_epi16(sc8));
            sum = _mm256_sub_epi32(sum, _mm256_slli_epi32(corr, 5));
            acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sum), _mm256_set1_ps(h2f(x[b].d) * y[b].d), acc);
        }
        c[r] = hsum8(acc);
    }
}

/* Q6_K on 512-bit registers: per half of 128, the 64 low-bit bytes as one zmm give elements 0..63 (low
 * nibbles) and 64..127 (high nibbles) in order, so the activation needs no reordering; the 2 high bits come
 * from the 32 qh bytes and the same bytes shifted by 2, side by side. Scales per 16 by vpermw, the -32 offset
 * through the activation's sums of 16. */
AVX512 static void gemv_q6_K_avx512(int64_t k, const void *w, size_t ws, int64_t m, const void *a, float *c) {
    const int64_t nb = k / 256;
    const lw__block_q8_K *y = a;
    const __m512i m4 = _mm512_set1_epi8(0x0f), m3 = _mm512_set1_epi8(0x03), m30 = _mm512_set1_epi8(0x30);
    /* int16 lane i of a 64-element step covers elements 2i, 2i + 1: sub-block i / 8 of its 4 */
    const __m512i i0 = _mm512_set_epi16(3, 3, 3, 3, 3, 3, 3, 3, 2, 2, 2, 2, 2, 2, 2, 2, 1, 1, 1, 1, 1, 1, 1,
                                        1, 0, 0, 0, 0, 0, 0, 0, 0);
    for (int64_t r = 0; r < m; r++) {
        const lw__block_q6_K *x = (const lw__block_q6_K *)((const uint8_t *)w + (size_t)r * ws);
        __m512 acc = _mm512_setzero_ps();
        for (int64_t b = 0; b < nb; b++) {
            LW_PF_SPAN(&x[b], sizeof(lw__block_q6_K));
            const __m256i sc16 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)x[b].scales));
            const __m512i sc = _mm512_castsi256_si512(sc16);
            __m512i sum = _mm512_setzero_si512();
            for (int h = 0; h < 2; h++) {
                const __m512i l = _mm512_loadu_si512((const void *)(x[b].ql + 64 * h));
                const __m256i qh = _mm256_loadu_si256((const __m256i *)(x[b].qh + 32 * h));
                const __m512i hz = cat256(qh, _mm256_srli_epi16(qh, 2));
                const __m512i u0 =
                    _mm512_or_si512(_mm512_and_si512(l, m4), _mm512_slli_epi16(_mm512_and_si512(hz, m3), 4));
                const __m512i u1 =
                    _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(l, 4), m4), _mm512_and_si512(hz, m30));
                const __m512i y0 = _mm512_loadu_si512((const void *)(y[b].qs + 128 * h));
                const __m512i y1 = _mm512_loadu_si512((const void *)(y[b].qs + 128 * h + 64));
                const __m512i idx = _mm512_add_epi16(i0, _mm512_set1_epi16((short)(8 * h)));
                sum =
                    _mm512_dpwssd_epi32(sum, _mm512_maddubs_epi16(u0, y0), _mm512_permutexvar_epi16(idx, sc));
                sum = _mm512_dpwssd_epi32(
                    sum, _mm512_maddubs_epi16(u1, y1),
                    _mm512_permutexvar_epi16(_mm512_add_epi16(idx, _mm512_set1_epi16(4)), sc));
            }
            const __m256i corr = _mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)y[b].bsums), sc16);
            sum = _mm512_sub_epi32(sum,
                                   _mm512_inserti64x4(_mm512_setzero_si512(), _mm256_slli_epi32(corr, 5), 0));
            acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sum), _mm512_set1_ps(h2f(x[b].d) * y[b].d), acc);
        }
        c[r] = _mm512_reduce_add_ps(acc);
    }
}

/* ---------------------------------------------------------------------------------------------------------
 * Selection
 * ------------------------------------------------------------------------------------------------------- */

static int has_avx2(void) {
    unsigned eax, ebx, ecx, edx;
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
           __get_cpuid(1, &eax, &ebx, &ecx, &edx) && (ecx >> 29 & 1); /* F16C */
}

static int has_vnni(void) {
    __builtin_cpu_init();
    return has_avx2() && __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512bw") &&
           __builtin_cpu_supports("avx512vnni");
}

lw__quant_gemv_fn lw__quant_gemv_isa(uint32_t type, lw__gemv_isa isa) {
    if (isa == LW_GEMV_BEST) {
        lw__quant_gemv_fn f = lw__quant_gemv_isa(type, LW_GEMV_AVX512);
        if (!f) f = lw__quant_gemv_isa(type, LW_GEMV_VNNI);
        return f ? f : lw__quant_gemv_isa(type, LW_GEMV_AVX2);
    }
    if (isa == LW_GEMV_AVX512 && has_vnni() && __builtin_cpu_supports("avx512f")) {
        if (type == LW_TYPE_Q4_0) return gemv_q4_0_avx512;
        if (type == LW_TYPE_Q8_0) return gemv_q8_0_avx512;
        if (type == LW_TYPE_Q4_K) return gemv_q4_K_avx512;
        if (type == LW_TYPE_Q6_K) return gemv_q6_K_avx512;
    }
    if (isa == LW_GEMV_VNNI && has_vnni()) { /* only where VNNI changes the code */
        if (type == LW_TYPE_Q4_0) return gemv_q4_0_vnni;
        if (type == LW_TYPE_Q8_0) return gemv_q8_0_vnni;
    }
    if (isa == LW_GEMV_AVX2 && has_avx2()) {
        if (type == LW_TYPE_Q4_0) return gemv_q4_0_avx2;
        if (type == LW_TYPE_Q8_0) return gemv_q8_0_avx2;
        if (type == LW_TYPE_Q4_K) return gemv_q4_K_avx2;
        if (type == LW_TYPE_Q6_K) return gemv_q6_K_avx2;
    }
    return NULL;
}

#elif defined(__wasm_simd128__)

lw__quant_gemv_fn lw__quant_gemv_wasm(uint32_t type); /* quant-gemv-wasm.c */

lw__quant_gemv_fn lw__quant_gemv_isa(uint32_t type, lw__gemv_isa isa) {
    return isa == LW_GEMV_BEST || isa == LW_GEMV_SIMD128 ? lw__quant_gemv_wasm(type) : NULL;
}

#else

lw__quant_gemv_fn lw__quant_gemv_isa(uint32_t type, lw__gemv_isa isa) {
    (void)type, (void)isa;
    return NULL;
}

#endif

lw__quant_gemv_fn lw__quant_gemv_own(uint32_t type) {
    const char *force = getenv("LW_CPU_KERNELS");
    if (force && (!strcmp(force, "exact") || !strcmp(force, "scalar"))) return NULL;
    return lw__quant_gemv_isa(type, LW_GEMV_BEST);
}
