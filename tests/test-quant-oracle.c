/* Bit-exactness of every weight format against ggml itself: node-llama-cpp's prebuilt libggml-base.so
 * (llama.cpp v0.4.0) is loaded with dlopen and, for each entry of our traits table,
 *   (a) our dequantize_row must equal ggml's to_float bit for bit, on blocks ggml quantized from random
 *       floats and on random block bytes (half-float scale fields forced finite; the IQ formats use
 *       lw__iq_random_blocks, whose blocks are valid by construction);
 *   (b) our quantizer must equal ggml_quantize_chunk byte for byte, without an imatrix wherever ggml can
 *       quantize without one, and with a random imatrix wherever we implement that path;
 *   (c) the activation formats Q8_1 and Q8_K (not weight types) against quantize_row_q8_1_ref /
 *       quantize_row_q8_K_ref / dequantize_row_q8_K, which libggml-base exports.
 * Prints a per-format table. Skips (77) when the library is absent (npm install not run). */
#include "quant/quant-iq.h"
#include "quant/quant.h"
#include "test.h"

#include <dlfcn.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

#define GGML_LIB "node_modules/@node-llama-cpp/linux-x64/bins/linux-x64/libggml-base.so"

/* ---------------------------------------------------------------------------------------------------------
 * The few ggml declarations we need (ggml.h, v0.4.0). enum ggml_type is passed as int.
 * ------------------------------------------------------------------------------------------------------- */

typedef void (*ggml_to_float_t)(const void *x, float *y, int64_t k);
typedef void (*ggml_from_float_t)(const float *x, void *y, int64_t k);

/* Mirror of struct ggml_type_traits (field order and types as in ggml.h). */
struct ggml_type_traits_mirror {
    const char *type_name;
    int64_t blck_size;
    int64_t blck_size_interleave;
    size_t type_size;
    bool is_quantized;
    ggml_to_float_t to_float;
    ggml_from_float_t from_float_ref;
};

static const struct ggml_type_traits_mirror *(*g_get_type_traits)(int type);
static size_t (*g_quantize_chunk)(int type, const float *src, void *dst, int64_t start, int64_t nrows,
                                  int64_t n_per_row, const float *imatrix);
static bool (*g_requires_imatrix)(int type);
static size_t (*g_type_size)(int type);
static int64_t (*g_blck_size)(int type);
static ggml_from_float_t g_q8_1_ref, g_q8_K_ref;
static ggml_to_float_t g_deq_q8_K;

/* ---------------------------------------------------------------------------------------------------------
 * Random numbers (splitmix64)
 * ------------------------------------------------------------------------------------------------------- */

static uint64_t rng_state;
static uint64_t rnd(void) {
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}
static float unif(void) { return (float)((rnd() >> 40) * (1.0 / 16777216.0)); } /* [0, 1) */
static float gauss(void) {
    float u = unif(), v = unif();
    if (u < 1e-7f) u = 1e-7f;
    return sqrtf(-2.0f * logf(u)) * cosf(6.2831853f * v);
}

#define N_KINDS 12
#define KIND_EXTREME 11 /* NaN, infinities, subnormal and huge blocks: only formats without grid searches */
/* Fills x with one of several distributions chosen to reach the quantizers' corner cases. */
static void fill_floats(float *x, int64_t n, int kind, int64_t blk) {
    for (int64_t i = 0; i < n; i++) {
        switch (kind) {
        case 0: x[i] = gauss(); break;                                   /* plain weights            */
        case 1: x[i] = 2 * unif() - 1; break;                             /* uniform                  */
        case 2: x[i] = gauss() * (rnd() % 50 == 0 ? 40.f : 1.f); break;   /* outliers                 */
        case 3: x[i] = 0.1f + 2 * unif(); break;                          /* all positive             */
        case 4: x[i] = -0.1f - 2 * unif(); break;                         /* all negative             */
        case 5: x[i] = (i / blk) % 2 == 0 ? 0.f : gauss() * 1e-3f; break; /* zero blocks, small ones  */
        case 6: x[i] = gauss() * 1e-8f; break;                            /* fp16-subnormal scales    */
        case 7: x[i] = (float)((i / blk) % 5) - 2.f; break;               /* constant blocks          */
        case 8: x[i] = (float)((int)(rnd() % 9) - 4); break;              /* integers: rounding ties  */
        case 9: x[i] = gauss() * 3e4f; break;                             /* large: fp16 scale limits */
        case 10: x[i] = (rnd() % 4 == 0) ? 0.f : gauss(); break;          /* sparse                   */
        default: {                                                        /* extreme, by block        */
            const float g = gauss();
            switch ((i / blk) % 6) {
            case 0: x[i] = g * 1e-40f; break;                                 /* subnormal: 1/d -> inf */
            case 1: x[i] = (rnd() % 17 == 0) ? NAN : g; break;                /* a NaN                 */
            case 2: x[i] = (rnd() % 17 == 0) ? (g < 0 ? -INFINITY : INFINITY) : g; break;
            case 3: x[i] = g < 0 ? -3e38f : 3e38f; break;                     /* max - min overflows   */
            case 4: x[i] = (i % blk == 5) ? 1e-44f : 0.f; break;              /* one tiny value        */
            default: x[i] = g * 1e20f; break;                                 /* fp16 scale overflows  */
            }
            break;
        }
        }
    }
}

/* ---------------------------------------------------------------------------------------------------------
 * Random block bytes with finite half fields
 * ------------------------------------------------------------------------------------------------------- */

static uint16_t finite_half(void) {
    uint16_t h = (uint16_t)rnd();
    if (((h >> 10) & 31) == 31) h = (uint16_t)((h & 0x83ffu) | ((rnd() % 31) << 10));
    return h;
}

static void put_half(uint8_t *p, uint16_t h) {
    p[0] = (uint8_t)h;
    p[1] = (uint8_t)(h >> 8);
}

/* Byte offsets of the fp16 fields in one block of each non-IQ format (-1 ends the list). */
static void half_offsets(uint32_t type, int off[3]) {
    off[0] = off[1] = off[2] = -1;
    switch (type) {
    case LW_TYPE_Q4_0: case LW_TYPE_Q5_0: case LW_TYPE_Q8_0: case LW_TYPE_Q1_0: case LW_TYPE_Q2_0:
        off[0] = 0; break;
    case LW_TYPE_Q4_1: case LW_TYPE_Q5_1: case LW_TYPE_Q4_K: case LW_TYPE_Q5_K:
        off[0] = 0; off[1] = 2; break;
    case LW_TYPE_Q2_K: off[0] = (int)offsetof(lw__block_q2_K, d); off[1] = (int)offsetof(lw__block_q2_K, dmin); break;
    case LW_TYPE_Q3_K: off[0] = (int)offsetof(lw__block_q3_K, d); break;
    case LW_TYPE_Q6_K: off[0] = (int)offsetof(lw__block_q6_K, d); break;
    case LW_TYPE_TQ1_0: off[0] = (int)offsetof(lw__block_tq1_0, d); break;
    case LW_TYPE_TQ2_0: off[0] = (int)offsetof(lw__block_tq2_0, d); break;
    default: break;
    }
}

static bool is_iq(uint32_t t) {
    return t == LW_TYPE_IQ2_XXS || t == LW_TYPE_IQ2_XS || t == LW_TYPE_IQ2_S || t == LW_TYPE_IQ3_XXS ||
           t == LW_TYPE_IQ3_S || t == LW_TYPE_IQ1_S || t == LW_TYPE_IQ1_M || t == LW_TYPE_IQ4_NL ||
           t == LW_TYPE_IQ4_XS;
}

/* Fills nb blocks of type with random but decodable bytes. */
static void random_blocks(const lw__quant_traits_t *tr, uint8_t *dst, int64_t nb, uint64_t seed) {
    if (is_iq(tr->type)) {
        lw__iq_random_blocks(tr->type, dst, nb, seed);
        return;
    }
    for (int64_t i = 0; i < nb * (int64_t)tr->type_size; i++) dst[i] = (uint8_t)rnd();
    if (tr->type == LW_TYPE_F32) {
        for (int64_t i = 0; i < nb; i++) {
            float f = gauss() * 100.f;
            memcpy(dst + 4 * i, &f, 4);
        }
    } else if (tr->type == LW_TYPE_F16) {
        for (int64_t i = 0; i < nb; i++) put_half(dst + 2 * i, finite_half());
    } else if (tr->type == LW_TYPE_BF16) {
        for (int64_t i = 0; i < nb; i++)
            if ((dst[2 * i + 1] & 0x7f) == 0x7f && (dst[2 * i] & 0x80)) dst[2 * i + 1] &= 0xbf;
    } else {
        int off[3];
        half_offsets(tr->type, off);
        for (int64_t i = 0; i < nb; i++)
            for (int j = 0; j < 3 && off[j] >= 0; j++) put_half(dst + i * tr->type_size + off[j], finite_half());
    }
}

/* ---------------------------------------------------------------------------------------------------------
 * Comparisons
 * ------------------------------------------------------------------------------------------------------- */

typedef struct {
    int deq_cases, deq_bad;     /* dequantize comparisons and mismatches        */
    int q_cases, q_bad;         /* quantize (no imatrix) comparisons/mismatches */
    int qi_cases, qi_bad;       /* quantize with imatrix                         */
    const char *q_note;         /* why (b) did not run                           */
    const char *qi_note;        /* why the imatrix comparison did not run        */
} result_t;

static int64_t first_diff_u8(const uint8_t *a, const uint8_t *b, int64_t n) {
    for (int64_t i = 0; i < n; i++)
        if (a[i] != b[i]) return i;
    return -1;
}

/* Dequantizes nb blocks with both implementations and compares bit patterns. */
static void compare_dequant(const lw__quant_traits_t *tr, const struct ggml_type_traits_mirror *gt,
                            const uint8_t *blocks, int64_t nb, result_t *r, const char *what) {
    const int64_t n = nb * tr->block_size;
    float *a = malloc((size_t)n * sizeof(float)), *b = malloc((size_t)n * sizeof(float));
    memset(a, 0x5a, (size_t)n * sizeof(float));
    memset(b, 0xa5, (size_t)n * sizeof(float));
    CHECK(lw__dequantize(tr->type, blocks, a, n) == LW_OK);
    if (gt->to_float) gt->to_float(blocks, b, n);
    else memcpy(b, blocks, (size_t)n * sizeof(float)); /* F32 has no to_float in ggml: identity */
    /* Bit patterns must be equal, except that any NaN equals any NaN: which operand's NaN (sign, payload) an
     * IEEE operation propagates depends on the compiler's operand order, which C leaves open. */
    int64_t d = -1;
    for (int64_t i = 0; i < n && d < 0; i++)
        if (memcmp(&a[i], &b[i], sizeof(float)) != 0 && !(isnan(a[i]) && isnan(b[i]))) d = i;
    r->deq_cases++;
    if (d >= 0) {
        r->deq_bad++;
        if (r->deq_bad <= 3)
            fprintf(stderr, "  %s dequant mismatch (%s) at element %lld: ours %.9g ggml %.9g\n", tr->name, what,
                    (long long)d, a[d], b[d]);
    }
    free(a);
    free(b);
}

/* Quantizes nrows x n_per_row with both implementations (imatrix may be NULL), compares the bytes and
 * feeds ggml's blocks to the dequant comparison. */
static void compare_quant(const lw__quant_traits_t *tr, const struct ggml_type_traits_mirror *gt,
                          const float *x, int64_t nrows, int64_t n_per_row, const float *imatrix, result_t *r,
                          int kind) {
    const size_t row = (size_t)(n_per_row / tr->block_size) * tr->type_size;
    const size_t total = row * (size_t)nrows;
    uint8_t *a = malloc(total), *b = malloc(total);
    memset(a, 0, total);
    memset(b, 0, total);
    const lw_status st = lw__quantize(tr->type, x, a, nrows, n_per_row, imatrix);
    const size_t got = g_quantize_chunk((int)tr->type, x, b, 0, nrows, n_per_row, imatrix);
    CHECK(st == LW_OK);
    CHECK(got == total);
    const int64_t d = first_diff_u8(a, b, (int64_t)total);
    if (imatrix) r->qi_cases++;
    else r->q_cases++;
    if (d >= 0) {
        int *bad = imatrix ? &r->qi_bad : &r->q_bad;
        (*bad)++;
        if (*bad <= 3)
            fprintf(stderr, "  %s quant%s mismatch (kind %d, %lld x %lld): byte %lld of block %lld: ours %02x ggml %02x\n",
                    tr->name, imatrix ? "+imatrix" : "", kind, (long long)nrows, (long long)n_per_row,
                    (long long)(d % (int64_t)tr->type_size), (long long)(d / (int64_t)tr->type_size), a[d], b[d]);
    }
    compare_dequant(tr, gt, b, (int64_t)(total / tr->type_size), r, "ggml-quantized blocks");
    free(a);
    free(b);
}

/* ---------------------------------------------------------------------------------------------------------
 * Per format
 * ------------------------------------------------------------------------------------------------------- */

static void test_format(const lw__quant_traits_t *tr, result_t *r) {
    const int t = (int)tr->type;
    const struct ggml_type_traits_mirror *gt = g_get_type_traits(t);
    CHECK_MSG(gt && gt->blck_size == (int64_t)tr->block_size && gt->type_size == tr->type_size,
              "%s: block layout differs from ggml", tr->name);
    CHECK(g_type_size(t) == tr->type_size && g_blck_size(t) == (int64_t)tr->block_size);
    CHECK_MSG(lw_type_get(tr->type) && lw_type_get(tr->type)->type_size == tr->type_size &&
                  lw_type_get(tr->type)->block_size == tr->block_size,
              "%s: traits disagree with lw_type_get", tr->name);
    const bool ggml_needs_imatrix = g_requires_imatrix(t);
    CHECK_MSG(ggml_needs_imatrix == tr->requires_imatrix, "%s: requires_imatrix differs from ggml", tr->name);

    /* (a) random blocks */
    if (!tr->to_float) {
        r->deq_cases = -1;
    } else {
        for (uint64_t seed = 1; seed <= 4; seed++) {
            rng_state = seed * 1000003u + (uint64_t)t;
            const int64_t nb = (int64_t)(1 + seed * 7) * (tr->block_size == 1 ? 37 : 1);
            uint8_t *blk = malloc((size_t)nb * tr->type_size);
            random_blocks(tr, blk, nb, seed);
            compare_dequant(tr, gt, blk, nb, r, "random blocks");
            free(blk);
        }
    }

    /* (a) on blocks ggml quantizes, also for formats we cannot quantize ourselves (with an imatrix where
     * ggml needs one). */
    const int64_t bs = tr->block_size;
    /* ggml_quantize_init for the IQ2/IQ1 grids alone takes ~20 s of CPU here, so any ggml quantization of
     * those formats runs only with LW_TEST_SLOW=1 (their random valid blocks above are always checked, and
     * test-quant-iq.c covers their quantizers). */
    const bool slow_init = tr->type == LW_TYPE_IQ2_XXS || tr->type == LW_TYPE_IQ2_XS || tr->type == LW_TYPE_IQ2_S ||
                           tr->type == LW_TYPE_IQ1_S || tr->type == LW_TYPE_IQ1_M;
    const char *slow = getenv("LW_TEST_SLOW");
    const bool run_slow = !slow_init || (slow && *slow == '1');
    if (tr->to_float && (!tr->quantize || (ggml_needs_imatrix && !tr->imatrix_supported)) && run_slow) {
        for (int kind = 0; kind < N_KINDS; kind += 5) {
            rng_state = 4242u + (uint64_t)kind + (uint64_t)t;
            const int64_t n = 2 * bs, nrows = 1;
            float *x = malloc((size_t)(n * nrows) * sizeof(float)), *im = malloc((size_t)n * sizeof(float));
            fill_floats(x, n * nrows, kind, bs < 16 ? 16 : bs);
            for (int64_t j = 0; j < n; j++) im[j] = 0.01f + unif();
            const size_t total = (size_t)(n / bs * nrows) * tr->type_size;
            uint8_t *b = calloc(1, total);
            CHECK(g_quantize_chunk(t, x, b, 0, nrows, n, ggml_needs_imatrix ? im : NULL) == total);
            compare_dequant(tr, gt, b, (int64_t)(total / tr->type_size), r, "ggml-quantized blocks");
            free(b);
            free(x);
            free(im);
        }
    }

    /* (b) quantize, and (a) again on ggml's blocks */
    const char *san = getenv("LW_TEST_SANITIZED");
    const bool sanitized = san && *san && *san != '0';
    const int64_t lens[4] = {bs == 1 ? 1 : bs, bs == 1 ? 7 : 2 * bs, bs == 1 ? 64 : 3 * bs, bs == 1 ? 257 : 8 * bs};
    for (int with_imatrix = 0; with_imatrix < 2; with_imatrix++) {
        const char **note = with_imatrix ? &r->qi_note : &r->q_note;
        if (!tr->quantize) {
            *note = "not implemented";
            continue;
        }
        if (!run_slow) {
            *note = "with LW_TEST_SLOW=1";
            continue;
        }
        if (!with_imatrix && ggml_needs_imatrix) {
            *note = "ggml needs imatrix";
            continue;
        }
        if (with_imatrix && !tr->imatrix_supported) {
            *note = "not implemented";
            continue;
        }
        for (int kind = 0; kind < N_KINDS; kind++) {
            if (kind == KIND_EXTREME && is_iq(tr->type)) continue; /* ggml's grid searches assert on NaN */
            for (int li = 0; li < 4; li++) {
                /* Under the sanitizers (scripts/test.sh sets LW_TEST_SANITIZED) one seed and two lengths. */
                if (sanitized && (li == 1 || li == 3)) continue;
                for (uint64_t seed = 1; seed <= (sanitized ? 1u : 2u); seed++) {
                    const int64_t nrows = 1 + (int64_t)((seed + (uint64_t)li) % 3);
                    const int64_t n = lens[li];
                    rng_state = seed * 7919u + (uint64_t)kind * 131u + (uint64_t)li * 17u + (uint64_t)t;
                    float *x = malloc((size_t)(nrows * n) * sizeof(float));
                    float *im = malloc((size_t)n * sizeof(float));
                    fill_floats(x, nrows * n, kind, bs < 16 ? 16 : bs);
                    for (int64_t j = 0; j < n; j++) im[j] = (seed == 2 && rnd() % 10 == 0) ? 0.f : 0.01f + unif();
                    compare_quant(tr, gt, x, nrows, n, with_imatrix ? im : NULL, r, kind);
                    free(x);
                    free(im);
                }
            }
        }
    }
}

/* Q8_1 and Q8_K: activation formats, compared through the exported row functions. */
static void test_activation_formats(void) {
    for (int kind = 0; kind < N_KINDS; kind++) {
        for (uint64_t seed = 1; seed <= 3; seed++) {
            rng_state = seed * 104729u + (uint64_t)kind;
            const int64_t n = 1024;
            float *x = malloc(n * sizeof(float));
            fill_floats(x, n, kind, 256);
            uint8_t a[36 * 32], b[36 * 32];
            memset(a, 0, sizeof a);
            memset(b, 0, sizeof b);
            lw__quantize_row_q8_1_ref(x, a, n);
            g_q8_1_ref(x, b, n);
            CHECK_MSG(memcmp(a, b, n / 32 * 36) == 0, "q8_1 ref mismatch kind %d seed %d", kind, (int)seed);
            uint8_t c[292 * 4], d[292 * 4];
            memset(c, 0, sizeof c);
            memset(d, 0, sizeof d);
            lw__quantize_row_q8_K_ref(x, c, n);
            g_q8_K_ref(x, d, n);
            CHECK_MSG(memcmp(c, d, sizeof c) == 0, "q8_K ref mismatch kind %d seed %d", kind, (int)seed);
            float ya[1024], yb[1024];
            lw__dequantize_row_q8_K(d, ya, n);
            g_deq_q8_K(d, yb, n);
            CHECK_MSG(memcmp(ya, yb, sizeof ya) == 0, "q8_K dequant mismatch kind %d", kind);
            free(x);
        }
    }
}

int main(void) {
    void *lib = dlopen(GGML_LIB, RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        char why[512];
        snprintf(why, sizeof why, "%s not loadable (run npm install in the repo root): %s", GGML_LIB, dlerror());
        test_skip(why);
    }
    *(void **)&g_get_type_traits = dlsym(lib, "ggml_get_type_traits");
    *(void **)&g_quantize_chunk = dlsym(lib, "ggml_quantize_chunk");
    *(void **)&g_requires_imatrix = dlsym(lib, "ggml_quantize_requires_imatrix");
    *(void **)&g_type_size = dlsym(lib, "ggml_type_size");
    *(void **)&g_blck_size = dlsym(lib, "ggml_blck_size");
    *(void **)&g_q8_1_ref = dlsym(lib, "quantize_row_q8_1_ref");
    *(void **)&g_q8_K_ref = dlsym(lib, "quantize_row_q8_K_ref");
    *(void **)&g_deq_q8_K = dlsym(lib, "dequantize_row_q8_K");
    if (!g_get_type_traits || !g_quantize_chunk || !g_requires_imatrix || !g_type_size || !g_blck_size ||
        !g_q8_1_ref || !g_q8_K_ref || !g_deq_q8_K)
        test_skip("libggml-base.so lacks an expected symbol");

    printf("%-8s | %-22s | %-26s | %-26s | %s\n", "format", "dequant == ggml", "quant == ggml",
           "quant+imatrix == ggml", "cpu");
    int n_formats = 0;
    for (uint32_t t = 0; t < LW_TYPE_COUNT; t++) {
        const lw__quant_traits_t *tr = lw__quant_traits(t);
        if (!tr) continue;
        n_formats++;
        result_t r = {0};
        const clock_t c0 = clock();
        test_format(tr, &r);
        const double secs = (double)(clock() - c0) / CLOCKS_PER_SEC;
        char c1[64], c2[64], c3[64];
        if (r.deq_cases < 0) snprintf(c1, sizeof c1, "MISSING (no dequant)");
        else snprintf(c1, sizeof c1, "%s %d/%d", r.deq_bad ? "FAIL" : "ok", r.deq_cases - r.deq_bad, r.deq_cases);
        if (r.q_note) snprintf(c2, sizeof c2, "- (%s)", r.q_note);
        else snprintf(c2, sizeof c2, "%s %d/%d", r.q_bad ? "FAIL" : "ok", r.q_cases - r.q_bad, r.q_cases);
        if (r.qi_note) snprintf(c3, sizeof c3, "- (%s)", r.qi_note);
        else snprintf(c3, sizeof c3, "%s %d/%d", r.qi_bad ? "FAIL" : "ok", r.qi_cases - r.qi_bad, r.qi_cases);
        printf("%-8s | %-22s | %-26s | %-26s | %.2f s\n", tr->name, c1, c2, c3, secs);
        fflush(stdout);
        CHECK_MSG(r.deq_bad == 0 && r.q_bad == 0 && r.qi_bad == 0, "%s differs from ggml", tr->name);
        /* Every weight format must at least dequantize. */
        CHECK_MSG(r.deq_cases > 0, "%s has no dequantize", tr->name);
    }
    CHECK(n_formats == 28);
    test_activation_formats();
    printf("q8_1 / q8_K activation refs: compared over %d inputs\n", N_KINDS * 3);
    dlclose(lib);
    return test_summary("test-quant-oracle");
}
