/* IQ quantization family (quant-iq.c, iq-grids.c): checks that need nothing (table facts, the random block
 * generator, IQ4 round trips, argument handling), then bit-for-bit comparisons with ggml v0.4.0's own code,
 * loaded with dlopen from node-llama-cpp's prebuilt libggml-base.so:
 *   - all 9 formats: our dequantize_row == ggml's to_float, float bits identical, on blocks from our
 * generator and on raw random bytes (any sign of d, subnormals) over enough blocks to hit every grid entry;
 *   - every format we quantize: our bytes == ggml_quantize_chunk's (with and without an imatrix; only with
 *     one where ggml requires it, and then ours must refuse NULL) and == ggml's from_float_ref where ggml has
 *     one (quantize_row_*_ref).
 * When the library is absent (npm install not run) the ggml-free checks still run and the test then exits
 * 77 (skipped) with a message; set LW_GGML_BASE to a libggml-base.so path to use another copy. */
#include "core/core.h"
#include "quant/iq-grids.h"
#include "quant/quant-iq.h"
#include "quant/quant.h"
#include "test.h"

#include <dlfcn.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>

#define GGML_BASE_DEFAULT "node_modules/@node-llama-cpp/linux-x64/bins/linux-x64/libggml-base.so"

/* ---------------------------------------------------------------------------------------------------------
 * ggml's API, declared from ggml/include/ggml.h (v0.4.0); enum ggml_type is passed as int (same ids).
 * ------------------------------------------------------------------------------------------------------- */
typedef void (*ggml_to_float_t)(const void *x, float *y, int64_t k);
typedef void (*ggml_from_float_t)(const float *x, void *y, int64_t k);
struct ggml_type_traits {
    const char *type_name;
    int64_t blck_size;
    int64_t blck_size_interleave;
    size_t type_size;
    bool is_quantized;
    ggml_to_float_t to_float;
    ggml_from_float_t from_float_ref;
};
typedef const struct ggml_type_traits *(*get_type_traits_fn)(int type);
typedef size_t (*quantize_chunk_fn)(int type, const float *src, void *dst, int64_t start, int64_t nrows,
                                    int64_t n_per_row, const float *imatrix);
typedef bool (*requires_imatrix_fn)(int type);
typedef void (*quantize_init_fn)(int type);

static get_type_traits_fn ggml_get_type_traits_p;
static quantize_chunk_fn ggml_quantize_chunk_p;
static requires_imatrix_fn ggml_quantize_requires_imatrix_p;
static quantize_init_fn ggml_quantize_init_p;

/* ---------------------------------------------------------------------------------------------------------
 * The formats under test
 * ------------------------------------------------------------------------------------------------------- */
typedef struct {
    uint32_t type;           /* lw_type id                                  */
    const char *name;        /* for the table                               */
    lw__to_float_fn dequant; /* ours                                        */
    int d_offset;            /* byte offset of the fp16 d, -1 for IQ1_M     */
    /* results, for the summary table */
    long deq_blocks, deq_bad; /* blocks compared with ggml / differing     */
    long q_rows, q_bad;       /* quantized rows compared / differing       */
    long gen_blocks, gen_bad; /* generator blocks checked / not valid      */
    double rt_err;            /* round-trip relative rms error, Gaussian   */
    bool q_slow_skipped;      /* ggml comparison left out (slow setup)     */
} fmt_t;

static fmt_t fmts[] = {
    {.type = LW_TYPE_IQ2_XXS, .name = "iq2_xxs", .dequant = lw__dequantize_row_iq2_xxs, .d_offset = 0},
    {.type = LW_TYPE_IQ2_XS, .name = "iq2_xs", .dequant = lw__dequantize_row_iq2_xs, .d_offset = 0},
    {.type = LW_TYPE_IQ3_XXS, .name = "iq3_xxs", .dequant = lw__dequantize_row_iq3_xxs, .d_offset = 0},
    {.type = LW_TYPE_IQ1_S, .name = "iq1_s", .dequant = lw__dequantize_row_iq1_s, .d_offset = 0},
    {.type = LW_TYPE_IQ4_NL, .name = "iq4_nl", .dequant = lw__dequantize_row_iq4_nl, .d_offset = 0},
    {.type = LW_TYPE_IQ3_S, .name = "iq3_s", .dequant = lw__dequantize_row_iq3_s, .d_offset = 0},
    {.type = LW_TYPE_IQ2_S, .name = "iq2_s", .dequant = lw__dequantize_row_iq2_s, .d_offset = 0},
    {.type = LW_TYPE_IQ4_XS, .name = "iq4_xs", .dequant = lw__dequantize_row_iq4_xs, .d_offset = 0},
    {.type = LW_TYPE_IQ1_M, .name = "iq1_m", .dequant = lw__dequantize_row_iq1_m, .d_offset = -1},
};
#define NFMTS ((int)(sizeof fmts / sizeof fmts[0]))

/* The test's own generator (xorshift64*), independent of the one in quant-iq.c. */
static uint64_t t_rng = 0x853c49e6748fea9bull;
static uint64_t t_next(void) {
    t_rng ^= t_rng >> 12;
    t_rng ^= t_rng << 25;
    t_rng ^= t_rng >> 27;
    return t_rng * 0x2545f4914f6cdd1dull;
}
static float t_uniform(void) { /* [0, 1) */
    return (float)(t_next() >> 40) / 16777216.f;
}
static float t_gauss(void) {
    float u = t_uniform(), v = t_uniform();
    if (u < 1e-7f) u = 1e-7f;
    return sqrtf(-2.f * logf(u)) * cosf(6.2831853f * v);
}

static int popcount8(unsigned v) {
    int n = 0;
    for (; v; v >>= 1) n += (int)(v & 1);
    return n;
}

/* ---------------------------------------------------------------------------------------------------------
 * 1. Facts of the tables (would catch a mis-transcription without ggml at hand)
 * ------------------------------------------------------------------------------------------------------- */
/* Order key of a grid entry: its 8 bytes as base-b digits, byte 7 most significant; for the signed IQ1 grid
 * a digit is value + 1. ggml lists every grid in strictly ascending order of this key (so: no repeats). */
static uint64_t grid_key(uint64_t e, bool is_signed) {
    uint64_t k = 0;
    for (int j = 7; j >= 0; --j) {
        const int v = is_signed ? (int)(int8_t)(uint8_t)(e >> (8 * j)) + 1 : (int)(uint8_t)(e >> (8 * j));
        k = k * (is_signed ? 3 : 256) + (uint64_t)v;
    }
    return k;
}

static void check_u64_grid(const char *name, const uint64_t *g, int n, const int *allowed, int nallowed) {
    const bool is_signed = allowed[0] < 0;
    int bad = 0, order = 0;
    for (int i = 0; i < n; ++i) {
        for (int j = 0; j < 8; ++j) {
            const uint8_t byte = (uint8_t)(g[i] >> (8 * j));
            const int v = is_signed ? (int)(int8_t)byte : (int)byte;
            int ok = 0;
            for (int a = 0; a < nallowed; ++a) ok |= (v == allowed[a]);
            bad += !ok;
        }
        if (i > 0 && grid_key(g[i], is_signed) <= grid_key(g[i - 1], is_signed)) order++;
    }
    CHECK_MSG(bad == 0, "%s: %d bytes outside the format's values", name, bad);
    CHECK_MSG(order == 0, "%s: %d entries not strictly ascending", name, order);
}

static void check_tables(void) {
    for (int j = 0; j < LW_IQ_KMASK_N; ++j) CHECK(lw__iq_kmask[j] == (1u << j));
    int bad = 0;
    for (int i = 0; i < LW_IQ_KSIGNS_N; ++i) {
        bad += lw__iq_ksigns[i] != (unsigned)(i | ((popcount8((unsigned)i) & 1) << 7));
        bad += (popcount8(lw__iq_ksigns[i]) & 1) != 0; /* even number of negations */
    }
    CHECK_MSG(bad == 0, "ksigns: %d entries break i | parity(i) << 7", bad);
    for (int i = 1; i < LW_IQ4NL_NVALUES; ++i) CHECK(lw__iq4nl_values[i] > lw__iq4nl_values[i - 1]);
    CHECK(lw__iq4nl_values[0] == -127 && lw__iq4nl_values[15] == 113);

    static const int m2[] = {8, 25, 43};
    check_u64_grid("iq2xxs_grid", lw__iq2xxs_grid, LW_IQ2XXS_GRID_N, m2, 3);
    check_u64_grid("iq2xs_grid", lw__iq2xs_grid, LW_IQ2XS_GRID_N, m2, 3);
    check_u64_grid("iq2s_grid", lw__iq2s_grid, LW_IQ2S_GRID_N, m2, 3);
    static const int m1[] = {-1, 0, 1};
    check_u64_grid("iq1s_grid", lw__iq1s_grid, LW_IQ1S_GRID_N, m1, 3);
    int bad3 = 0, bad3s = 0, dup3 = 0, dup3s = 0;
    for (int i = 0; i < LW_IQ3XXS_GRID_N; ++i) {
        for (int j = 0; j < 4; ++j) {
            const unsigned v = (lw__iq3xxs_grid[i] >> (8 * j)) & 0xff;
            bad3 += !(v == 62 || (v >= 4 && v <= 52 && v % 8 == 4));
        }
        if (i > 0 && lw__iq3xxs_grid[i] <= lw__iq3xxs_grid[i - 1]) dup3++;
    }
    for (int i = 0; i < LW_IQ3S_GRID_N; ++i) {
        for (int j = 0; j < 4; ++j) {
            const unsigned v = (lw__iq3s_grid[i] >> (8 * j)) & 0xff;
            bad3s += !(v >= 1 && v <= 15 && v % 2 == 1);
        }
        if (i > 0 && lw__iq3s_grid[i] <= lw__iq3s_grid[i - 1]) dup3s++;
    }
    CHECK_MSG(bad3 == 0 && dup3 == 0, "iq3xxs_grid: %d bad bytes, %d out of order", bad3, dup3);
    CHECK_MSG(bad3s == 0 && dup3s == 0, "iq3s_grid: %d bad bytes, %d out of order", bad3s, dup3s);
}

/* ---------------------------------------------------------------------------------------------------------
 * 2. Our generator, independently of ggml: finite, within amax, signs balanced, deterministic
 * ------------------------------------------------------------------------------------------------------- */
static void check_generator(fmt_t *f) {
    const size_t bs = lw_type_get(f->type)->type_size;
    const int64_t be = lw_type_get(f->type)->block_size;
    enum { NB = 64 };
    uint8_t *blk = malloc(NB * bs), *blk2 = malloc(NB * bs);
    float *y = malloc(sizeof(float) * NB * (size_t)be);
    static const float amaxes[] = {1.0f, 0.02f, 300.f};
    for (int a = 0; a < 3; ++a) {
        uint64_t rng = 12345u + (uint64_t)a, rng2 = rng;
        long neg = 0, pos = 0;
        float ymax = 0;
        for (int i = 0; i < NB; ++i) {
            CHECK(lw__iq_random_block(f->type, &rng, amaxes[a], blk + i * bs) == LW_OK);
            CHECK(lw__iq_random_block(f->type, &rng2, amaxes[a], blk2 + i * bs) == LW_OK);
        }
        CHECK_MSG(memcmp(blk, blk2, NB * bs) == 0, "%s: generator not deterministic", f->name);
        f->dequant(blk, y, NB * be);
        for (int i = 0; i < NB; ++i) {
            int bad = 0;
            for (int64_t j = 0; j < be; ++j) {
                const float v = y[i * be + j];
                if (!isfinite(v) || fabsf(v) > amaxes[a]) bad = 1;
                neg += v < 0;
                pos += v > 0;
                if (fabsf(v) > ymax) ymax = fabsf(v);
            }
            /* the stored d must be a positive finite half (IQ1_M keeps it in the scale nibbles) */
            if (f->d_offset >= 0) {
                const float d = lw__fp16_to_fp32(lw__rd_u16(blk + i * bs + f->d_offset));
                if (!(d > 0) || !isfinite(d)) bad = 1;
            }
            f->gen_blocks++;
            f->gen_bad += bad;
        }
        const double frac = (double)neg / (double)(neg + pos);
        CHECK_MSG(frac > 0.4 && frac < 0.6, "%s: %.3f of values negative", f->name, frac);
        /* values use a good part of the range (the largest codes do occur over 64 blocks) */
        CHECK_MSG(ymax > 0.25f * amaxes[a], "%s: largest |value| %g for amax %g", f->name, ymax, amaxes[a]);
    }
    CHECK_MSG(f->gen_bad == 0, "%s: %ld generated blocks not valid", f->name, f->gen_bad);
    uint64_t rng = 1;
    CHECK(lw__iq_random_block(f->type, &rng, 0.f, blk) == LW_ERR_INVALID_ARG);
    CHECK(lw__iq_random_block(f->type, &rng, NAN, blk) == LW_ERR_INVALID_ARG);
    CHECK(lw__iq_random_block(f->type, &rng, 1e30f, blk) == LW_ERR_INVALID_ARG);
    CHECK(lw__iq_random_block(f->type, NULL, 1.f, blk) == LW_ERR_INVALID_ARG);
    free(blk);
    free(blk2);
    free(y);
}

/* ---------------------------------------------------------------------------------------------------------
 * Test data for the quantizers: kinds of rows that take different paths through the scale search
 * ------------------------------------------------------------------------------------------------------- */
enum {
    DATA_GAUSS,
    DATA_UNIFORM,
    DATA_OUTLIERS,
    DATA_ZERO_TINY,
    DATA_CONST,
    DATA_LARGE,
    DATA_SPARSE,
    DATA_KINDS
};
static const char *data_names[DATA_KINDS] = {"gauss", "uniform", "outliers", "zero/tiny",
                                             "const", "large",   "sparse"};

/* Fills n values; when first_normal, the first 32 values are never all below ggml's epsilon (ggml's
 * quantize_row_iq4_nl_ref leaves such a first block's levels uninitialized). */
static void fill_data(float *x, int64_t n, int kind, bool first_normal) {
    for (int64_t i = 0; i < n; ++i) {
        float v = t_gauss();
        switch (kind) {
        case DATA_UNIFORM:
            v = 2.f * t_uniform() - 1.f;
            break;
        case DATA_OUTLIERS:
            v = (t_next() % 37 == 0) ? 40.f * t_gauss() : 0.02f * v;
            break;
        case DATA_ZERO_TINY: {
            const int64_t blk = i / 32;
            v = blk % 3 == 0 ? 0.f : blk % 3 == 1 ? 1e-20f * v : v;
            break;
        }
        case DATA_CONST:
            v = (i / 32) % 2 ? -0.75f : 0.5f;
            break;
        case DATA_LARGE:
            v = 2000.f * v;
            break;
        case DATA_SPARSE:
            v = (t_next() % 8 == 0) ? v : 0.f;
            break;
        default:
            break;
        }
        x[i] = v;
    }
    if (first_normal && n >= 32) x[0] = 1.0f;
}

/* Our quantizers (ggml_quantize_chunk's path and quantize_row_*_ref) for a format; NULL when we have none. */
static void our_quantizers(uint32_t type, lw__quantize_fn *chunk, lw__from_float_fn *ref) {
    *chunk = NULL;
    *ref = NULL;
    switch (type) {
    case LW_TYPE_IQ4_NL:
        *chunk = lw__quantize_iq4_nl, *ref = lw__quantize_row_iq4_nl_ref;
        break;
    case LW_TYPE_IQ4_XS:
        *chunk = lw__quantize_iq4_xs, *ref = lw__quantize_row_iq4_xs_ref;
        break;
#if LW_QUANT_IQ_HAVE_QUANT_IQ3_XXS && LW_QUANT_IQ_HAVE_REF_IQ3_XXS
    case LW_TYPE_IQ3_XXS:
        *chunk = lw__quantize_iq3_xxs, *ref = lw__quantize_row_iq3_xxs_ref;
        break;
#endif
#if LW_QUANT_IQ_HAVE_QUANT_IQ2_XXS
    case LW_TYPE_IQ2_XXS:
        *chunk = lw__quantize_iq2_xxs;
        break;
#endif
#if LW_QUANT_IQ_HAVE_QUANT_IQ2_XS
    case LW_TYPE_IQ2_XS:
        *chunk = lw__quantize_iq2_xs;
        break;
#endif
#if LW_QUANT_IQ_HAVE_QUANT_IQ1_S
    case LW_TYPE_IQ1_S:
        *chunk = lw__quantize_iq1_s;
        break;
#endif
#if LW_QUANT_IQ_HAVE_QUANT_IQ1_M
    case LW_TYPE_IQ1_M:
        *chunk = lw__quantize_iq1_m;
        break;
#endif
#if LW_QUANT_IQ_HAVE_QUANT_IQ2_S && LW_QUANT_IQ_HAVE_REF_IQ2_S
    case LW_TYPE_IQ2_S:
        *chunk = lw__quantize_iq2_s, *ref = lw__quantize_row_iq2_s_ref;
        break;
#endif
#if LW_QUANT_IQ_HAVE_QUANT_IQ3_S && LW_QUANT_IQ_HAVE_REF_IQ3_S
    case LW_TYPE_IQ3_S:
        *chunk = lw__quantize_iq3_s, *ref = lw__quantize_row_iq3_s_ref;
        break;
#endif
    default:
        break;
    }
}

static bool has_quantizer(uint32_t type) {
    lw__quantize_fn chunk;
    lw__from_float_fn ref;
    our_quantizers(type, &chunk, &ref);
    return chunk != NULL;
}

/* 3. Round trips without ggml: quantize -> dequantize of Gaussian data loses less than a bound set by the
 * format's bits per weight (loose: it catches broken quantizers, not small regressions; the bit-exact
 * comparison with ggml is the real check). An imatrix of ones where one is required. */
static double roundtrip_error(const fmt_t *f, bool use_ref, const float *x, float *y, uint8_t *q, int64_t n,
                              const float *ones) {
    lw__quantize_fn chunk;
    lw__from_float_fn ref;
    our_quantizers(f->type, &chunk, &ref);
    const lw_type_info *ti = lw_type_get(f->type);
    const size_t bytes = (size_t)n / ti->block_size * ti->type_size;
    if (use_ref) {
        ref(x, q, n);
    } else {
        const bool needs =
            f->type == LW_TYPE_IQ2_XXS || f->type == LW_TYPE_IQ2_XS || f->type == LW_TYPE_IQ1_S;
        CHECK(chunk(x, q, 1, n, needs ? ones : NULL) == bytes);
    }
    f->dequant(q, y, n);
    double e2 = 0, s2 = 0;
    for (int64_t i = 0; i < n; ++i) {
        e2 += (double)(x[i] - y[i]) * (x[i] - y[i]);
        s2 += (double)x[i] * x[i];
    }
    return sqrt(e2 / s2);
}

static void check_roundtrip(fmt_t *f) {
    enum { N = 4096 };
    lw__quantize_fn chunk;
    lw__from_float_fn ref;
    our_quantizers(f->type, &chunk, &ref);
    if (!chunk) return;
    float *x = malloc(sizeof(float) * N), *y = malloc(sizeof(float) * N), *ones = malloc(sizeof(float) * N);
    uint8_t *q = malloc(N); /* more than any format's N / block_size * type_size */
    for (int i = 0; i < N; ++i) ones[i] = 1.f;
    fill_data(x, N, DATA_GAUSS, true);
    /* bound: 2.5x the distortion-rate limit of a Gaussian source, relative rms error 2^-R at R bits per
     * weight (ggml's quantizers reach about 1.4-1.7x); always < 1, so an all-zero output fails */
    const double bpw = 8.0 * lw_type_get(f->type)->type_size / lw_type_get(f->type)->block_size;
    const double bound = 2.5 * pow(2.0, -bpw);
    f->rt_err = roundtrip_error(f, false, x, y, q, N, ones);
    CHECK_MSG(f->rt_err < bound, "%s: round trip relative rms error %.4f (bound %.4f)", f->name, f->rt_err,
              bound);
    if (ref) {
        const double e = roundtrip_error(f, true, x, y, q, N, ones);
        CHECK_MSG(e < bound, "%s ref: round trip relative rms error %.4f (bound %.4f)", f->name, e, bound);
    }
    printf("  round trip %-8s: relative rms error %.4f (bound %.4f)\n", f->name, f->rt_err, bound);
    free(x);
    free(y);
    free(ones);
    free(q);
}

/* Bad input never crashes: non-finite, huge and subnormal values go through every quantizer (ggml itself may
 * abort on some of these, so they are not compared); under ASAN/UBSAN this also checks memory safety. The
 * output must have the right size and decode without crashing. */
static void check_hostile_inputs(const fmt_t *f) {
    lw__quantize_fn chunk;
    lw__from_float_fn ref;
    our_quantizers(f->type, &chunk, &ref);
    if (!chunk) return;
    enum { N = 512 };
    const lw_type_info *ti = lw_type_get(f->type);
    const size_t bytes = N / ti->block_size * ti->type_size;
    float *x = malloc(sizeof(float) * N), *y = malloc(sizeof(float) * N), *qw = malloc(sizeof(float) * N);
    uint8_t *q = malloc(bytes);
    for (int kind = 0; kind < 5; ++kind) {
        for (int i = 0; i < N; ++i) {
            const float g = t_gauss();
            switch (kind) {
            case 0:
                x[i] = NAN;
                break;
            case 1:
                x[i] = i % 3 == 0 ? INFINITY : i % 3 == 1 ? -INFINITY : g;
                break;
            case 2:
                x[i] = g * 3e38f;
                break;
            case 3:
                x[i] = g * 1e-42f;
                break; /* subnormal */
            default:
                x[i] = i % 7 == 0 ? NAN : g;
                break;
            }
            qw[i] = kind == 4 && i % 5 == 0 ? NAN : 1.f;
        }
        for (int use_qw = 0; use_qw < 2; ++use_qw) {
            const bool needs =
                f->type == LW_TYPE_IQ2_XXS || f->type == LW_TYPE_IQ2_XS || f->type == LW_TYPE_IQ1_S;
            if (needs && !use_qw) continue;
            CHECK_MSG(chunk(x, q, 1, N, use_qw ? qw : NULL) == bytes, "%s: hostile input kind %d", f->name,
                      kind);
            f->dequant(q, y, N);
        }
        if (ref) {
            ref(x, q, N);
            f->dequant(q, y, N);
        }
    }
    free(x);
    free(y);
    free(qw);
    free(q);
}

/* ---------------------------------------------------------------------------------------------------------
 * 4. Against ggml
 * ------------------------------------------------------------------------------------------------------- */

/* Random bytes with a finite d of either sign (all other fields are valid for any bits in every format). */
static void fill_raw_blocks(const fmt_t *f, uint8_t *blk, int64_t nblocks) {
    const size_t bs = lw_type_get(f->type)->type_size;
    for (size_t i = 0; i < (size_t)nblocks * bs; ++i) blk[i] = (uint8_t)t_next();
    for (int64_t b = 0; b < nblocks; ++b) {
        uint8_t *p = blk + b * bs;
        if (f->d_offset >= 0) {
            uint16_t h = lw__rd_u16(p + f->d_offset);
            if ((h & 0x7c00) == 0x7c00) h &= 0xbfff; /* inf/NaN exponent -> finite */
            p[f->d_offset] = (uint8_t)h;
            p[f->d_offset + 1] = (uint8_t)(h >> 8);
        } else {
            /* IQ1_M: bits 12..15 of the 4th scales u16 are d's bits 12..15; bit 14 is in the exponent */
            const lw__block_iq1_m *m = (const lw__block_iq1_m *)p;
            const uint16_t s2 = lw__rd_u16(m->scales + 4), s3 = lw__rd_u16(m->scales + 6);
            const unsigned e = ((s2 >> 14) & 3) | ((s3 >> 12) & 7) << 2; /* d bits 10..14 */
            if (e == 0x1f) p[offsetof(lw__block_iq1_m, scales) + 7] &= 0xbf;
        }
    }
}

static void compare_dequant(fmt_t *f, const uint8_t *blk, int64_t nblocks) {
    const struct ggml_type_traits *tt = ggml_get_type_traits_p((int)f->type);
    const int64_t be = lw_type_get(f->type)->block_size;
    const int64_t k = nblocks * be;
    float *a = malloc(sizeof(float) * (size_t)k), *b = malloc(sizeof(float) * (size_t)k);
    memset(a, 0xa5, sizeof(float) * (size_t)k);
    memset(b, 0x5a, sizeof(float) * (size_t)k);
    f->dequant(blk, a, k);
    tt->to_float(blk, b, k);
    int first_bad = -1;
    for (int64_t i = 0; i < nblocks; ++i) {
        if (memcmp(a + i * be, b + i * be, sizeof(float) * (size_t)be) != 0) {
            f->deq_bad++;
            if (first_bad < 0) first_bad = (int)i;
        }
        f->deq_blocks++;
    }
    if (first_bad >= 0) {
        for (int64_t j = first_bad * be; j < (first_bad + 1) * be; ++j) {
            if (memcmp(&a[j], &b[j], sizeof(float)) != 0) {
                fprintf(stderr, "  %s: block %d elem %ld: ours %.9g ggml %.9g\n", f->name, first_bad,
                        (long)(j - first_bad * be), a[j], b[j]);
                break;
            }
        }
    }
    free(a);
    free(b);
}

static void check_against_ggml_dequant(fmt_t *f) {
    const struct ggml_type_traits *tt = ggml_get_type_traits_p((int)f->type);
    const lw_type_info *ti = lw_type_get(f->type);
    CHECK_MSG(tt && tt->to_float && tt->blck_size == (int64_t)ti->block_size &&
                  tt->type_size == ti->type_size,
              "%s: ggml traits disagree on block layout", f->name);
    if (!tt || !tt->to_float) return;
    const size_t bs = ti->type_size;
    /* 2048 random blocks make >= 32 uniform grid draws each, 65536 over at most 2048 entries: each grid entry
     * is missed with probability ~exp(-32), so the tables are compared with ggml's in full. */
    enum { BIG = 2048 };
    uint8_t *blk = malloc(BIG * bs);
    static const int64_t lens[] = {1, 3, 16}; /* blocks per row */
    for (int seed = 1; seed <= 4; ++seed) {
        for (int li = 0; li < 3; ++li) {
            uint64_t rng = (uint64_t)seed * 1000003u + (uint64_t)li;
            for (int64_t b = 0; b < lens[li]; ++b) {
                CHECK(lw__iq_random_block(f->type, &rng, seed % 2 ? 1.f : 0.05f, blk + b * bs) == LW_OK);
            }
            compare_dequant(f, blk, lens[li]);
            fill_raw_blocks(f, blk, lens[li]);
            compare_dequant(f, blk, lens[li]);
        }
    }
    fill_raw_blocks(f, blk, BIG);
    compare_dequant(f, blk, BIG);
    lw__iq_random_blocks(f->type, blk, BIG, 77);
    compare_dequant(f, blk, BIG);
    CHECK_MSG(f->deq_bad == 0, "%s: %ld of %ld blocks dequantize differently from ggml", f->name, f->deq_bad,
              f->deq_blocks);
    free(blk);
}

/* Bytes of our quantizers vs ggml's, over data kinds x row lengths x imatrix or not. */
static void check_against_ggml_quant(fmt_t *f) {
    const struct ggml_type_traits *tt = ggml_get_type_traits_p((int)f->type);
    const lw_type_info *ti = lw_type_get(f->type);
    const bool nl = f->type == LW_TYPE_IQ4_NL;
    lw__quantize_fn ours;
    lw__from_float_fn ours_ref;
    our_quantizers(f->type, &ours, &ours_ref);
    if (!ours) return;
    /* formats ggml quantizes only with an imatrix are compared with one; ours must refuse to go without */
    const bool needs_imatrix = ggml_quantize_requires_imatrix_p((int)f->type);
    CHECK_MSG((ours_ref != NULL) == (tt->from_float_ref != NULL), "%s: ggml %s a from_float_ref", f->name,
              tt->from_float_ref ? "has" : "has no");
    ggml_quantize_init_p((int)f->type); /* ggml's grid quantizers need their tables before from_float_ref */
    static const int64_t lens_nl[] = {32, 96, 256, 4096};
    static const int64_t lens_xs[] = {256, 512, 768, 1280};
    const int64_t *lens = nl ? lens_nl : lens_xs;
    enum { NROWS = 3, MAXN = 4096 };
    float *x = malloc(sizeof(float) * NROWS * MAXN), *qw = malloc(sizeof(float) * MAXN);
    const size_t maxbytes = (size_t)NROWS * MAXN / ti->block_size * ti->type_size;
    uint8_t *a = malloc(maxbytes), *b = malloc(maxbytes);
    for (int kind = 0; kind < DATA_KINDS; ++kind) {
        for (int li = 0; li < 4; ++li) {
            const int64_t n = lens[li];
            const size_t rowbytes = (size_t)n / ti->block_size * ti->type_size;
            for (int r = 0; r < NROWS; ++r) fill_data(x + r * n, n, kind, true);
            for (int64_t i = 0; i < n; ++i) qw[i] = t_uniform() * 4.f + (i % 5 == 0 ? 0.f : 0.01f);
            for (int use_qw = needs_imatrix; use_qw < 2; ++use_qw) {
                memset(a, 0xcc, maxbytes);
                memset(b, 0x33, maxbytes);
                const size_t na = ours(x, a, NROWS, n, use_qw ? qw : NULL);
                const size_t nbytes =
                    ggml_quantize_chunk_p((int)f->type, x, b, 0, NROWS, n, use_qw ? qw : NULL);
                CHECK(na == nbytes && na == NROWS * rowbytes);
                for (int r = 0; r < NROWS; ++r) {
                    const bool bad = memcmp(a + r * rowbytes, b + r * rowbytes, rowbytes) != 0;
                    f->q_rows++;
                    f->q_bad += bad;
                    if (bad)
                        fprintf(stderr, "  %s: %s n=%ld imatrix=%d row %d differs\n", f->name,
                                data_names[kind], (long)n, use_qw, r);
                }
            }
            if (needs_imatrix) CHECK(ours(x, a, NROWS, n, NULL) == 0);
            /* quantize_row_*_ref (the traits' from_float_ref): one row at a time */
            for (int r = 0; r < NROWS && ours_ref && tt->from_float_ref; ++r) {
                memset(a, 0xcc, rowbytes);
                memset(b, 0x33, rowbytes);
                ours_ref(x + r * n, a, n);
                tt->from_float_ref(x + r * n, b, n);
                const bool bad = memcmp(a, b, rowbytes) != 0;
                f->q_rows++;
                f->q_bad += bad;
                if (bad)
                    fprintf(stderr, "  %s: _ref %s n=%ld row %d differs\n", f->name, data_names[kind],
                            (long)n, r);
            }
        }
    }
    CHECK_MSG(f->q_bad == 0, "%s: %ld of %ld quantized rows differ from ggml", f->name, f->q_bad, f->q_rows);
    free(x);
    free(qw);
    free(a);
    free(b);
}

/* ---------------------------------------------------------------------------------------------------------
 * main
 * ------------------------------------------------------------------------------------------------------- */
/* ggml builds its IQ2/IQ1 quantizer tables serially (measured here: IQ1 17.8 s, IQ2_S 6.6 s, IQ2_XS 3.0 s,
 * IQ2_XXS 1.5 s), so comparing IQ2_S, IQ2_XS, IQ1_S and IQ1_M with ggml runs only when LW_TEST_SLOW=1.
 * IQ2_XXS always runs: it exercises the same 8-dimensional neighbour search, sign parity and scale fitting.
 * The round trips above run for every format. */
static bool slow_ggml_setup(uint32_t type) {
    return type == LW_TYPE_IQ2_S || type == LW_TYPE_IQ2_XS || type == LW_TYPE_IQ1_S || type == LW_TYPE_IQ1_M;
}

int main(void) {
    check_tables();
    for (int i = 0; i < NFMTS; ++i) {
        CHECK(lw_type_get(fmts[i].type) != NULL);
        check_generator(&fmts[i]);
    }
    for (int i = 0; i < NFMTS; ++i) check_roundtrip(&fmts[i]);
    for (int i = 0; i < NFMTS; ++i) check_hostile_inputs(&fmts[i]);
    uint64_t rng = 1;
    uint8_t junk[256];
    CHECK(lw__iq_random_block(LW_TYPE_Q4_0, &rng, 1.f, junk) == LW_ERR_INVALID_ARG);

    const char *path = getenv("LW_GGML_BASE");
    if (!path || !*path) path = GGML_BASE_DEFAULT;
    void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    bool have_ggml = false;
    if (!lib) {
        printf("NOTE: ggml comparison skipped: cannot load %s (%s); run npm install in the repo root\n", path,
               dlerror());
    } else {
        ggml_get_type_traits_p = (get_type_traits_fn)dlsym(lib, "ggml_get_type_traits");
        ggml_quantize_chunk_p = (quantize_chunk_fn)dlsym(lib, "ggml_quantize_chunk");
        ggml_quantize_requires_imatrix_p = (requires_imatrix_fn)dlsym(lib, "ggml_quantize_requires_imatrix");
        ggml_quantize_init_p = (quantize_init_fn)dlsym(lib, "ggml_quantize_init");
        have_ggml = ggml_get_type_traits_p && ggml_quantize_chunk_p && ggml_quantize_requires_imatrix_p &&
                    ggml_quantize_init_p;
        CHECK_MSG(have_ggml, "%s lacks the ggml symbols this test needs", path);
    }
    const char *slow = getenv("LW_TEST_SLOW");
    const bool run_slow = slow && *slow && strcmp(slow, "0") != 0;
    if (have_ggml && !run_slow) {
        printf("NOTE: IQ2_XS/IQ2_S/IQ1_S/IQ1_M quantizers are not compared with ggml (its table setup "
               "takes ~27 s); "
               "set LW_TEST_SLOW=1\n");
    }
    if (have_ggml) {
        for (int i = 0; i < NFMTS; ++i) {
            check_against_ggml_dequant(&fmts[i]);
            if (slow_ggml_setup(fmts[i].type) && !run_slow) {
                fmts[i].q_slow_skipped = has_quantizer(fmts[i].type);
                continue;
            }
            check_against_ggml_quant(&fmts[i]);
        }
        /* ggml's imatrix requirement, which decides which formats need our random-block generator */
        for (int i = 0; i < NFMTS; ++i) {
            printf("  ggml_quantize_requires_imatrix(%s) = %d\n", fmts[i].name,
                   (int)ggml_quantize_requires_imatrix_p((int)fmts[i].type));
        }
    }

    printf("\n%-8s | %-24s | %-22s | %-15s | %-14s\n", "format", "dequant == ggml (blocks)",
           "quant == ggml (rows)", "generator valid", "round-trip rms");
    for (int i = 0; i < NFMTS; ++i) {
        const fmt_t *f = &fmts[i];
        char d[64], q[64], g[64];
        if (have_ggml)
            snprintf(d, sizeof d, "%ld/%ld", f->deq_blocks - f->deq_bad, f->deq_blocks);
        else
            snprintf(d, sizeof d, "skipped (no ggml)");
        if (f->q_rows)
            snprintf(q, sizeof q, "%ld/%ld", f->q_rows - f->q_bad, f->q_rows);
        else if (!has_quantizer(f->type))
            snprintf(q, sizeof q, "n/a (no quantizer)");
        else if (f->q_slow_skipped)
            snprintf(q, sizeof q, "LW_TEST_SLOW=1 to run");
        else
            snprintf(q, sizeof q, "skipped (no ggml)");
        snprintf(g, sizeof g, "%ld/%ld", f->gen_blocks - f->gen_bad, f->gen_blocks);
        char rt[32];
        if (f->rt_err > 0)
            snprintf(rt, sizeof rt, "%.4f", f->rt_err);
        else
            snprintf(rt, sizeof rt, "-");
        printf("%-8s | %-24s | %-22s | %-15s | %-14s\n", f->name, d, q, g, rt);
    }
    if (lib) dlclose(lib);
    const int rc = test_summary("test-quant-iq");
    if (rc == 0 && !have_ggml) test_skip("the checks above passed, but the comparison with ggml did not run");
    return rc;
}
