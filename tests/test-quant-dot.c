/* Reference quantized dot products (src/cpu/quant-dot.c), for every weight type that has one:
 *   (1) close to the dot of the dequantized weight row with the dequantized activation row, in double
 *       (the integer parts are exact; only float scaling/accumulation and Q8_1's fp16 block sums differ);
 *   (2) bit-identical to ggml-cpu's scalar kernels (ggml_vec_dot_<w>_<a>_generic, exported by
 *       node-llama-cpp's libggml-cpu-x64.so), when that library is present (else that part is skipped with
 *       a message; part 1 always runs). */
#include "cpu/quant-dot.h"
#include "quant/quant-iq.h"
#include "test.h"

#include "core/core.h"

#include <dlfcn.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#define GGML_CPU_LIB "node_modules/@node-llama-cpp/linux-x64/bins/linux-x64/libggml-cpu-x64.so"
#define GGML_CPU_AVX2_LIB "node_modules/@node-llama-cpp/linux-x64/bins/linux-x64/libggml-cpu-haswell.so"

typedef void (*ggml_vec_dot_t)(int n, float *s, size_t bs, const void *x, size_t bx, const void *y, size_t by,
                               int nrc);

static uint64_t rng_state = 1;
static uint64_t rnd(void) {
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}
static float unif(void) { return (float)((rnd() >> 40) * (1.0 / 16777216.0)); }
static float gauss(void) {
    float u = unif(), v = unif();
    if (u < 1e-7f) u = 1e-7f;
    return sqrtf(-2.0f * logf(u)) * cosf(6.2831853f * v);
}

static void fill(float *x, int64_t n, int kind) {
    for (int64_t i = 0; i < n; i++) {
        switch (kind) {
        case 0: x[i] = gauss(); break;
        case 1: x[i] = gauss() * (rnd() % 40 == 0 ? 30.f : 1.f); break;
        case 2: x[i] = 0.2f + unif(); break; /* one-signed: large min terms */
        default: x[i] = (rnd() % 3 == 0) ? 0.f : gauss() * 0.01f; break;
        }
    }
}

/* scripts/test.sh sets LW_TEST_SANITIZED under ASAN/UBSAN: fewer ggml builds are compared there. */
static bool sanitized(void) {
    const char *s = getenv("LW_TEST_SANITIZED");
    return s && *s && *s != '0';
}

static const char *act_name(uint32_t t) {
    return t == LW_TYPE_Q8_0 ? "q8_0" : t == LW_TYPE_Q8_1 ? "q8_1" : "q8_K";
}

/* lw__quantize_row_q8_{0,1}_x86 against the AVX2 build's quantize_row_q8_{0,1} (needs an AVX2+FMA+F16C CPU). */
static void test_x86_activation_quantizers(void) {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
    if (!__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("fma")) {
        printf("NOTE: no AVX2/FMA here: x86 activation quantizer comparison skipped\n");
        return;
    }
    void *lib = dlopen(GGML_CPU_AVX2_LIB, RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        printf("NOTE: %s not loadable: x86 activation quantizer comparison skipped\n", GGML_CPU_AVX2_LIB);
        return;
    }
    void (*cpu_init)(void);
    void (*g_q8_0)(const float *, void *, int64_t);
    void (*g_q8_1)(const float *, void *, int64_t);
    *(void **)&cpu_init = dlsym(lib, "ggml_cpu_init");
    *(void **)&g_q8_0 = dlsym(lib, "quantize_row_q8_0");
    *(void **)&g_q8_1 = dlsym(lib, "quantize_row_q8_1");
    CHECK(cpu_init && g_q8_0 && g_q8_1);
    if (!cpu_init || !g_q8_0 || !g_q8_1) return;
    cpu_init();
    enum { N = 32 * 512 };
    static float x[N];
    static uint8_t a[N / 32 * 36], b[N / 32 * 36], r[N / 32 * 36];
    long ref_diff0 = 0, ref_diff1 = 0, real_diff = 0; /* real_diff: q8_0 quants differing on non-tie data */
    for (int kind = 0; kind < 5; kind++) {
        rng_state = 777u + (uint64_t)kind;
        if (kind < 4) {
            fill(x, N, kind);
        } else {
            /* ties: amax 127 gives id = 1 exactly, so halves round to even (x86) or away (reference) */
            for (int i = 0; i < N; i++) x[i] = (i % 32 == 0) ? 127.0f : (float)((int)(rnd() % 200) - 100) + 0.5f;
        }
        lw__quantize_row_q8_0_x86(x, a, N);
        g_q8_0(x, b, N);
        CHECK_MSG(memcmp(a, b, N / 32 * 34) == 0, "q8_0 x86 quantizer differs from ggml AVX2 (kind %d)", kind);
        lw__quantize_row_q8_0_ref(x, r, N);
        for (int i = 0; i < N / 32 * 34; i++) {
            ref_diff0 += a[i] != r[i];
            if (kind < 4 && i % 34 >= 2) real_diff += a[i] != r[i];
        }
        lw__quantize_row_q8_1_x86(x, a, N);
        g_q8_1(x, b, N);
        CHECK_MSG(memcmp(a, b, N / 32 * 36) == 0, "q8_1 x86 quantizer differs from ggml AVX2 (kind %d)", kind);
        lw__quantize_row_q8_1_ref(x, r, N);
        for (int i = 0; i < N / 32 * 36; i++) ref_diff1 += a[i] != r[i];
    }
    printf("x86 activation quantizers == ggml AVX2 build over 5 x %d values; reference differs in %ld (q8_0) / %ld "
           "(q8_1) bytes, %ld of 4 x %d q8_0 quants on non-tie data\n", N, ref_diff0, ref_diff1, real_diff, N);
    CHECK(ref_diff0 > 0); /* the tie inputs must tell the two roundings apart */
    dlclose(lib);
#endif
}

/* The _x86 dots against every x86 build of ggml-cpu this CPU can run (ggml_backend_score() > 0): haswell
 * (AVX2) and the AVX-512 ones (same kernels for these types; VNNI variants compute the same integers). */
static void test_x86_dots(void) {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
    static const char *variants[] = {"haswell", "skylakex", "icelake", "cascadelake", "cooperlake", "cannonlake",
                                     "zen4", "alderlake", "sapphirerapids"};
    static const struct {
        uint32_t type;
        const char *sym;
        lw__vec_dot_fn dot;
    } cases[] = {
        {LW_TYPE_Q8_0, "ggml_vec_dot_q8_0_q8_0", lw__vec_dot_q8_0_q8_0_x86},
        {LW_TYPE_Q2_K, "ggml_vec_dot_q2_K_q8_K", lw__vec_dot_q2_K_q8_K_x86},
        {LW_TYPE_Q3_K, "ggml_vec_dot_q3_K_q8_K", lw__vec_dot_q3_K_q8_K_x86},
        {LW_TYPE_Q4_K, "ggml_vec_dot_q4_K_q8_K", lw__vec_dot_q4_K_q8_K_x86},
        {LW_TYPE_Q5_K, "ggml_vec_dot_q5_K_q8_K", lw__vec_dot_q5_K_q8_K_x86},
        {LW_TYPE_Q6_K, "ggml_vec_dot_q6_K_q8_K", lw__vec_dot_q6_K_q8_K_x86},
        {LW_TYPE_Q4_1, "ggml_vec_dot_q4_1_q8_1", lw__vec_dot_q4_1_q8_1_x86},
        {LW_TYPE_Q5_0, "ggml_vec_dot_q5_0_q8_0", lw__vec_dot_q5_0_q8_0_x86},
        {LW_TYPE_Q5_1, "ggml_vec_dot_q5_1_q8_1", lw__vec_dot_q5_1_q8_1_x86},
        {LW_TYPE_IQ4_XS, "ggml_vec_dot_iq4_xs_q8_K", lw__vec_dot_iq4_xs_q8_K_x86},
        {LW_TYPE_IQ2_XXS, "ggml_vec_dot_iq2_xxs_q8_K", lw__vec_dot_iq2_xxs_q8_K_x86},
        {LW_TYPE_IQ2_XS, "ggml_vec_dot_iq2_xs_q8_K", lw__vec_dot_iq2_xs_q8_K_x86},
        {LW_TYPE_IQ2_S, "ggml_vec_dot_iq2_s_q8_K", lw__vec_dot_iq2_s_q8_K_x86},
        {LW_TYPE_IQ3_XXS, "ggml_vec_dot_iq3_xxs_q8_K", lw__vec_dot_iq3_xxs_q8_K_x86},
        {LW_TYPE_IQ3_S, "ggml_vec_dot_iq3_s_q8_K", lw__vec_dot_iq3_s_q8_K_x86},
        {LW_TYPE_IQ1_S, "ggml_vec_dot_iq1_s_q8_K", lw__vec_dot_iq1_s_q8_K_x86},
        {LW_TYPE_IQ1_M, "ggml_vec_dot_iq1_m_q8_K", lw__vec_dot_iq1_m_q8_K_x86},
    };
    int n_variants = 0;
    for (size_t vi = 0; vi < sizeof variants / sizeof variants[0]; vi++) {
        char path[256];
        snprintf(path, sizeof path, "node_modules/@node-llama-cpp/linux-x64/bins/linux-x64/libggml-cpu-%s.so",
                 variants[vi]);
        void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
        if (!lib) continue;
        int (*score)(void);
        void (*cpu_init)(void);
        *(void **)&score = dlsym(lib, "ggml_backend_score");
        *(void **)&cpu_init = dlsym(lib, "ggml_cpu_init");
        if (!score || score() <= 0 || !cpu_init) { /* this CPU lacks the variant's instructions */
            dlclose(lib);
            continue;
        }
        cpu_init();
        n_variants++;
        if (sanitized() && n_variants > 1) { /* one variant is enough under the sanitizers (slow there) */
            dlclose(lib);
            break;
        }
        int same = 0, total = 0, ref_differs = 0;
        for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
            ggml_vec_dot_t g;
            *(void **)&g = dlsym(lib, cases[c].sym);
            CHECK_MSG(g != NULL, "%s missing in %s", cases[c].sym, variants[vi]);
            if (!g) continue;
            const lw__quant_dot_t *qd = lw__quant_dot(cases[c].type);
            for (int kind = 0; kind < 4; kind++) {
                for (int nbk = 1; nbk <= 9; nbk += 2) {
                    const int64_t n = 256 * nbk;
                    rng_state = 5000u + 100u * c + 10u * (uint64_t)kind + (uint64_t)nbk;
                    float *w = malloc(n * sizeof(float)), *x = malloc(n * sizeof(float));
                    fill(w, n, kind);
                    fill(x, n, (kind + 2) % 4);
                    uint8_t *wq = malloc(lw__row_size(cases[c].type, n, NULL));
                    uint8_t *aq = calloc(1, (size_t)(n / 256) * sizeof(lw__block_q8_K));
                    const lw__quant_traits_t *tr = lw__quant_traits(cases[c].type);
                    if (!tr->quantize || tr->requires_imatrix) lw__iq_random_blocks(cases[c].type, wq, n / LW_QK_K, rng_state);
                    else CHECK(lw__quantize(cases[c].type, w, wq, 1, n, NULL) == LW_OK);
                    if (qd->vec_dot_type == LW_TYPE_Q8_0) lw__quantize_row_q8_0_x86(x, aq, n);
                    else if (qd->vec_dot_type == LW_TYPE_Q8_1) lw__quantize_row_q8_1_x86(x, aq, n);
                    else qd->act_from_float(x, aq, n);
                    const float ours = cases[c].dot(n, wq, aq), ref = qd->dot(n, wq, aq);
                    float gs = NAN;
                    g((int)n, &gs, 0, wq, 0, aq, 0, 1);
                    uint32_t ub, gb, rb;
                    memcpy(&ub, &ours, 4);
                    memcpy(&gb, &gs, 4);
                    memcpy(&rb, &ref, 4);
                    CHECK_MSG(ub == gb, "%s (%s): x86-order %.9g != ggml %.9g (n %lld kind %d)", cases[c].sym,
                              variants[vi], ours, gs, (long long)n, kind);
                    same += ub == gb;
                    ref_differs += rb != gb;
                    total++;
                    free(w);
                    free(x);
                    free(wq);
                    free(aq);
                }
            }
        }
        printf("x86-order dots (q8_0 q2_K-q6_K q4_1 q5_0 q5_1 iq4_xs iq1/iq2/iq3) == ggml-cpu-%s: %d/%d (generic order differs in %d)\n",
               variants[vi], same, total, ref_differs);
        /* Q8_0 prompts go through llamafile's tinyBLAS (2+ activation rows): same per-output order. */
        struct {
            int ith, nth;
            size_t wsize;
            void *wdata;
            void *threadpool;
            bool use_ref;
        } params = {0, 1, 0, NULL, NULL, false}; /* struct ggml_compute_params (ggml-cpu-impl.h) */
        bool (*sgemm)(const void *, int64_t, int64_t, int64_t, const void *, int64_t, const void *, int64_t, void *,
                      int64_t, int, int, int);
        *(void **)&sgemm = dlsym(lib, "llamafile_sgemm");
        for (int q5 = 0; sgemm && q5 < 2; q5++) {
            const uint32_t type = q5 ? LW_TYPE_Q5_0 : LW_TYPE_Q8_0;
            const size_t bw = q5 ? sizeof(lw__block_q5_0) : sizeof(lw__block_q8_0);
            const int64_t n = 1024, m = 8, nt = 5, kb = n / 32;
            rng_state = 4711u + (uint64_t)q5;
            float *w = malloc(m * n * sizeof(float)), *x = malloc(nt * n * sizeof(float)), C[8 * 5];
            fill(w, m * n, 0);
            fill(x, nt * n, 1);
            uint8_t *wq = malloc(m * kb * bw), *aq = malloc(nt * kb * 34);
            CHECK(lw__quantize(type, w, wq, m, n, NULL) == LW_OK);
            for (int t = 0; t < nt; t++) lw__quantize_row_q8_0_x86(x + t * n, aq + t * kb * 34, n);
            CHECK(sgemm(&params, m, nt, kb, wq, kb, aq, kb, C, m, (int)type, LW_TYPE_Q8_0, LW_TYPE_F32));
            int ok = 0;
            for (int t = 0; t < nt; t++)
                for (int r = 0; r < m; r++) {
                    const float ours = q5 ? lw__vec_dot_q5_0_q8_0_x86(n, wq + r * kb * bw, aq + t * kb * 34)
                                          : lw__vec_dot_q8_0_q8_0_x86(n, wq + r * kb * bw, aq + t * kb * 34);
                    uint32_t ub, gb;
                    memcpy(&ub, &ours, 4);
                    memcpy(&gb, &C[t * m + r], 4);
                    CHECK_MSG(ub == gb, "%s tinyBLAS (%s): ours %.9g ggml %.9g", q5 ? "q5_0" : "q8_0", variants[vi],
                              ours, C[t * m + r]);
                    ok += ub == gb;
                }
            printf("  ... and llamafile tinyBLAS %s (5 tokens x 8 rows): %d/%d equal\n", q5 ? "q5_0" : "q8_0", ok,
                   (int)(m * nt));
            free(w);
            free(x);
            free(wq);
            free(aq);
        }
        dlclose(lib);
    }
    if (!n_variants) printf("NOTE: no x86 ggml-cpu build runnable here: x86-order dot comparison skipped\n");
#endif
}

/* ---------------------------------------------------------------------------------------------------------
 * Repacked layouts (ggml-cpu repack.cpp's make_block_*x8, interleave 8), transcribed to drive ggml's gemv
 * kernels with our blocks.
 * ------------------------------------------------------------------------------------------------------- */

/* 8 rows x nb blocks of a 32-element format -> nb interleaved blocks: 8 scales (hbytes each), then the 8 x 16
 * quant bytes in 8-byte chunks, row-major by chunk (chunk i from row i % 8), XORed with 0x88 for Q4_0. */
static void repack32(uint8_t *out, const uint8_t *rows[8], int64_t nb, size_t bsize, size_t hbytes, bool xor88) {
    for (int64_t b = 0; b < nb; b++) {
        uint8_t *o = out + (size_t)b * (8 * hbytes + 128);
        for (int r = 0; r < 8; r++) memcpy(o + r * hbytes, rows[r] + (size_t)b * bsize, hbytes);
        for (int c = 0; c < 16; c++)
            for (int t = 0; t < 8; t++) {
                const uint8_t v = rows[c % 8][(size_t)b * bsize + hbytes + (c / 8) * 8 + t];
                o[8 * hbytes + c * 8 + t] = xor88 ? (uint8_t)(v ^ 0x88) : v;
            }
    }
}

/* 8 rows of Q4_K -> block_q4_Kx8: d[8], dmin[8], scales[96] (re-packed 6-bit scales/mins), qs[1024]. */
static void repack_q4_K(uint8_t *out, const uint8_t *const rowbytes[8], int64_t nb) {
    const lw__block_q4_K *rows[8];
    for (int r = 0; r < 8; r++) rows[r] = (const lw__block_q4_K *)(const void *)rowbytes[r];
    for (int64_t b = 0; b < nb; b++) {
        uint8_t *o = out + (size_t)b * (32 + 96 + 1024);
        for (int r = 0; r < 8; r++) {
            memcpy(o + 2 * r, &rows[r][b].d, 2);
            memcpy(o + 16 + 2 * r, &rows[r][b].dmin, 2);
        }
        uint8_t *sc = o + 32, *qs = o + 128;
        for (int c = 0; c < 128; c++) memcpy(qs + 8 * c, rows[c % 8][b].qs + (c / 8) * 8, 8);
        for (int half = 0; half < 2; half++) {
            for (int i = 0; i < 4; i++) {
                uint8_t sv[8], mv[8];
                for (int j = 0; j < 8; j++) {
                    const uint8_t *in = rows[j][b].scales;
                    if (half == 0) {
                        sv[j] = in[i] & 63;
                        mv[j] = in[i + 4] & 63;
                    } else {
                        sv[j] = (uint8_t)(((in[i] & 192) >> 2) | (in[i + 8] & 15));
                        mv[j] = (uint8_t)(((in[i + 4] & 192) >> 2) | ((in[i + 8] & 240) >> 4));
                    }
                }
                uint8_t *d = sc + 48 * half + 12 * i;
                for (int k = 0; k < 4; k++) {
                    d[k] = (uint8_t)((sv[k] & 63) + ((sv[k + 4] & 48) << 2));
                    d[4 + k] = (uint8_t)((mv[k] & 63) + ((mv[k + 4] & 48) << 2));
                    d[8 + k] = (uint8_t)((sv[k + 4] & 15) + ((mv[k + 4] & 15) << 4));
                }
            }
        }
    }
}

/* 8 rows of Q2_K -> block_q2_Kx8: d[8], dmin[8], scales[128] (byte i from row (i % 16) / 2, scale
 * (i / 16) * 2 + i % 2), qs[512] in 8-byte chunks (chunk c from row c % 8). */
static void repack_q2_K(uint8_t *out, const uint8_t *const rowbytes[8], int64_t nb) {
    const lw__block_q2_K *rows[8];
    for (int r = 0; r < 8; r++) rows[r] = (const lw__block_q2_K *)(const void *)rowbytes[r];
    for (int64_t b = 0; b < nb; b++) {
        uint8_t *o = out + (size_t)b * (32 + 128 + 512);
        for (int r = 0; r < 8; r++) {
            memcpy(o + 2 * r, &rows[r][b].d, 2);
            memcpy(o + 16 + 2 * r, &rows[r][b].dmin, 2);
        }
        for (int i = 0; i < 128; i++) o[32 + i] = rows[(i % 16) / 2][b].scales[(i / 16) * 2 + i % 2];
        for (int c = 0; c < 64; c++) memcpy(o + 160 + 8 * c, rows[c % 8][b].qs + (c / 8) * 8, 8);
    }
}

typedef void (*ggml_gemv_t)(int n, float *s, size_t bs, const void *vx, const void *vy, int nr, int nc);

/* The _x86_repack dots against ggml's gemv kernels of every x86 build this CPU runs. */
static void test_x86_repack(void) {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
    static const char *variants[] = {"haswell", "skylakex", "icelake", "cascadelake", "cooperlake", "cannonlake",
                                     "zen4", "alderlake", "sapphirerapids"};
    static const struct {
        uint32_t type;
        const char *sym;
        lw__vec_dot_fn dot;
    } cases[] = {
        {LW_TYPE_Q4_0, "ggml_gemv_q4_0_8x8_q8_0", lw__vec_dot_q4_0_q8_0_x86_repack},
        {LW_TYPE_IQ4_NL, "ggml_gemv_iq4_nl_8x8_q8_0", lw__vec_dot_iq4_nl_q8_0_x86_repack},
        {LW_TYPE_MXFP4, "ggml_gemv_mxfp4_8x8_q8_0", lw__vec_dot_mxfp4_q8_0_x86_repack},
        {LW_TYPE_Q4_K, "ggml_gemv_q4_K_8x8_q8_K", lw__vec_dot_q4_K_q8_K_x86_repack},
        {LW_TYPE_Q2_K, "ggml_gemv_q2_K_8x8_q8_K", lw__vec_dot_q2_K_q8_K_x86_repack},
    };
    int n_run = 0;
    for (size_t vi = 0; vi < sizeof variants / sizeof variants[0]; vi++) {
        char path[256];
        snprintf(path, sizeof path, "node_modules/@node-llama-cpp/linux-x64/bins/linux-x64/libggml-cpu-%s.so",
                 variants[vi]);
        void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
        if (!lib) continue;
        int (*score)(void);
        void (*cpu_init)(void);
        *(void **)&score = dlsym(lib, "ggml_backend_score");
        *(void **)&cpu_init = dlsym(lib, "ggml_cpu_init");
        if (!score || score() <= 0 || !cpu_init) {
            dlclose(lib);
            continue;
        }
        cpu_init();
        if (sanitized() && ++n_run > 1) {
            dlclose(lib);
            break;
        }
        int same = 0, total = 0;
        for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
            ggml_gemv_t g;
            *(void **)&g = dlsym(lib, cases[c].sym);
            CHECK_MSG(g != NULL, "%s missing in %s", cases[c].sym, variants[vi]);
            if (!g) continue;
            const lw__quant_dot_t *qd = lw__quant_dot(cases[c].type);
            const lw__quant_traits_t *tr = lw__quant_traits(cases[c].type);
            for (int kind = 0; kind < 4; kind++) {
                for (int nbk = 1; nbk <= 5; nbk += 2) {
                    const int64_t n = 256 * nbk, nb = n / tr->block_size;
                    const size_t rb = lw__row_size(cases[c].type, n, NULL);
                    rng_state = 9000u + 100u * c + 10u * (uint64_t)kind + (uint64_t)nbk;
                    float *w = malloc(8 * n * sizeof(float)), *x = malloc(n * sizeof(float));
                    fill(w, 8 * n, kind);
                    fill(x, n, (kind + 1) % 4);
                    uint8_t *wq = malloc(8 * rb), *rp = malloc(8 * rb), *aq = calloc(1, (size_t)(n / 256) * sizeof(lw__block_q8_K));
                    CHECK(lw__quantize(cases[c].type, w, wq, 8, n, NULL) == LW_OK);
                    const uint8_t *rows[8];
                    for (int r = 0; r < 8; r++) rows[r] = wq + r * rb;
                    if (cases[c].type == LW_TYPE_Q4_K) repack_q4_K(rp, rows, nb);
                    else if (cases[c].type == LW_TYPE_Q2_K) repack_q2_K(rp, rows, nb);
                    else repack32(rp, rows, nb, tr->type_size, cases[c].type == LW_TYPE_MXFP4 ? 1 : 2,
                                  cases[c].type == LW_TYPE_Q4_0);
                    if (qd->vec_dot_type == LW_TYPE_Q8_0) lw__quantize_row_q8_0_x86(x, aq, n);
                    else qd->act_from_float(x, aq, n);
                    float gs[8];
                    g((int)n, gs, 8, rp, aq, 1, 8);
                    for (int r = 0; r < 8; r++) {
                        const float ours = cases[c].dot(n, rows[r], aq);
                        uint32_t ub, gb;
                        memcpy(&ub, &ours, 4);
                        memcpy(&gb, &gs[r], 4);
                        CHECK_MSG(ub == gb, "%s (%s): row %d ours %.9g ggml %.9g (n %lld kind %d)", cases[c].sym,
                                  variants[vi], r, ours, gs[r], (long long)n, kind);
                        same += ub == gb;
                        total++;
                    }
                    free(w);
                    free(x);
                    free(wq);
                    free(rp);
                    free(aq);
                }
            }
        }
        printf("x86 repack-order dots (q4_0 iq4_nl mxfp4 q4_K q2_K) == ggml-cpu-%s gemv: %d/%d\n", variants[vi], same,
               total);
        /* Prompts: 4 activation rows at a time through ggml_quantize_mat_t<8, type> and the gemm kernels (its
         * Q8_K rows equal quantize_row_q8_K_ref's; its Q8_0 rows equal the x86 quantizer's). */
        void (*qmat0)(const float *, void *, int64_t, int64_t), (*qmatK)(const float *, void *, int64_t, int64_t);
        ggml_gemv_t gemm0, gemmK, gemm2;
        *(void **)&qmat0 = dlsym(lib, "_Z19ggml_quantize_mat_tILl8EL9ggml_type8EEvPKfPvll");
        *(void **)&qmatK = dlsym(lib, "_Z19ggml_quantize_mat_tILl8EL9ggml_type15EEvPKfPvll");
        *(void **)&gemm0 = dlsym(lib, "ggml_gemm_q4_0_8x8_q8_0");
        *(void **)&gemmK = dlsym(lib, "ggml_gemm_q4_K_8x8_q8_K");
        *(void **)&gemm2 = dlsym(lib, "ggml_gemm_q2_K_8x8_q8_K");
        if (qmat0 && qmatK && gemm0 && gemmK && gemm2) {
            int gsame[3] = {0, 0, 0}, gtotal[3] = {0, 0, 0};
            for (int isK = 0; isK < 3; isK++) { /* 0: Q4_0, 1: Q4_K, 2: Q2_K */
                const uint32_t type = isK == 2 ? LW_TYPE_Q2_K : isK ? LW_TYPE_Q4_K : LW_TYPE_Q4_0;
                const lw__quant_dot_t *qd = lw__quant_dot(type);
                const int64_t n = 512, nb = isK ? 2 : 16;
                const size_t rb = lw__row_size(type, n, NULL);
                rng_state = 31337u + (uint64_t)isK;
                float *w = malloc(8 * n * sizeof(float)), *x = malloc(4 * n * sizeof(float));
                fill(w, 8 * n, 0);
                fill(x, 4 * n, 1);
                uint8_t *wq = malloc(8 * rb), *rp = malloc(8 * rb), *am = calloc(4, 2 * sizeof(lw__block_q8_K) + 64);
                uint8_t *a1 = calloc(1, 2 * sizeof(lw__block_q8_K));
                CHECK(lw__quantize(type, w, wq, 8, n, NULL) == LW_OK);
                const uint8_t *rows[8];
                for (int r = 0; r < 8; r++) rows[r] = wq + r * rb;
                if (isK == 2) repack_q2_K(rp, rows, nb);
                else if (isK) repack_q4_K(rp, rows, nb);
                else repack32(rp, rows, nb, sizeof(lw__block_q4_0), 2, true);
                (isK ? qmatK : qmat0)(x, am, 4, n);
                float gs[4 * 8];
                (isK == 2 ? gemm2 : isK ? gemmK : gemm0)((int)n, gs, 8, rp, am, 4, 8);
                for (int t = 0; t < 4; t++) {
                    if (isK) qd->act_from_float(x + t * n, a1, n);
                    else lw__quantize_row_q8_0_x86(x + t * n, a1, n);
                    for (int r = 0; r < 8; r++) {
                        const float ours = isK == 2 ? lw__vec_dot_q2_K_q8_K_x86_repack_gemm(n, rows[r], a1)
                                           : isK    ? lw__vec_dot_q4_K_q8_K_x86_repack_gemm(n, rows[r], a1)
                                                    : lw__vec_dot_q4_0_q8_0_x86_repack(n, rows[r], a1);
                        uint32_t ub, gb;
                        memcpy(&ub, &ours, 4);
                        memcpy(&gb, &gs[t * 8 + r], 4);
                        gsame[isK] += ub == gb;
                        gtotal[isK]++;
                        CHECK_MSG(ub == gb, "%s gemm (%s): ours %.9g ggml %.9g", isK == 2 ? "q2_K" : isK ? "q4_K" : "q4_0",
                                  variants[vi], ours, gs[t * 8 + r]);
                    }
                }
                free(w);
                free(x);
                free(wq);
                free(rp);
                free(am);
                free(a1);
            }
            printf("  ... and ggml-cpu-%s 4-row gemm: q4_0 %d/%d, q4_K %d/%d, q2_K %d/%d equal\n", variants[vi],
                   gsame[0], gtotal[0], gsame[1], gtotal[1], gsame[2], gtotal[2]);
            /* IQ4_NL and MXFP4 share Q4_0's gemm template (different code table / scale). */
            for (int f = 0; f < 2; f++) {
                const uint32_t type = f ? LW_TYPE_MXFP4 : LW_TYPE_IQ4_NL;
                ggml_gemv_t gm;
                *(void **)&gm = dlsym(lib, f ? "ggml_gemm_mxfp4_8x8_q8_0" : "ggml_gemm_iq4_nl_8x8_q8_0");
                if (!gm) continue;
                const int64_t n = 512, nb = n / 32;
                const size_t bsz = f ? sizeof(lw__block_mxfp4) : sizeof(lw__block_iq4_nl), rb = (size_t)nb * bsz;
                rng_state = 777u + (uint64_t)f;
                float *w = malloc(8 * n * sizeof(float)), *x = malloc(4 * n * sizeof(float));
                fill(w, 8 * n, 1);
                fill(x, 4 * n, 0);
                uint8_t *wq = malloc(8 * rb), *rp = malloc(8 * rb), *am = calloc(4, (size_t)nb * 34 + 64);
                uint8_t *a1 = malloc((size_t)nb * 34);
                CHECK(lw__quantize(type, w, wq, 8, n, NULL) == LW_OK);
                const uint8_t *rows[8];
                for (int r = 0; r < 8; r++) rows[r] = wq + r * rb;
                repack32(rp, rows, nb, bsz, f ? 1 : 2, false);
                qmat0(x, am, 4, n);
                float gs[4 * 8];
                gm((int)n, gs, 8, rp, am, 4, 8);
                int ok = 0;
                for (int t = 0; t < 4; t++) {
                    lw__quantize_row_q8_0_x86(x + t * n, a1, n);
                    for (int r = 0; r < 8; r++) {
                        const float ours = f ? lw__vec_dot_mxfp4_q8_0_x86_repack(n, rows[r], a1)
                                             : lw__vec_dot_iq4_nl_q8_0_x86_repack(n, rows[r], a1);
                        uint32_t ub, gb;
                        memcpy(&ub, &ours, 4);
                        memcpy(&gb, &gs[t * 8 + r], 4);
                        CHECK_MSG(ub == gb, "%s gemm (%s): ours %.9g ggml %.9g", f ? "mxfp4" : "iq4_nl", variants[vi],
                                  ours, gs[t * 8 + r]);
                        ok += ub == gb;
                    }
                }
                printf("  ... and ggml-cpu-%s 4-row gemm %s: %d/32 equal\n", variants[vi], f ? "mxfp4" : "iq4_nl", ok);
                free(w);
                free(x);
                free(wq);
                free(rp);
                free(am);
                free(a1);
            }
        }
        dlclose(lib);
    }
#endif
}

int main(void) {
    void *lib = dlopen(GGML_CPU_LIB, RTLD_NOW | RTLD_LOCAL);
    if (!lib) printf("NOTE: %s not loadable (%s): ggml comparison skipped\n", GGML_CPU_LIB, dlerror());
    if (lib) {
        void (*cpu_init)(void);
        *(void **)&cpu_init = dlsym(lib, "ggml_cpu_init");
        if (cpu_init) cpu_init();
    }
    int n_types = 0;
    printf("%-8s %-5s | %-24s | %-22s\n", "weight", "act", "max err / bound (vs deq)", "== ggml generic");
    for (uint32_t t = 0; t < LW_TYPE_COUNT; t++) {
        const lw__quant_dot_t *qd = lw__quant_dot(t);
        if (!qd) continue;
        const lw__quant_traits_t *tr = lw__quant_traits(t);
        CHECK(tr && qd->type == t);
        if (!tr) continue;
        /* Formats we cannot quantize (IQ1/IQ2 need an imatrix) get random valid blocks instead. */
        const bool random_w = !tr->quantize || tr->requires_imatrix;
        n_types++;
        ggml_vec_dot_t gdot = NULL;
        if (lib) {
            char name[96];
            snprintf(name, sizeof name, "ggml_vec_dot_%s_%s_generic", tr->name, act_name(qd->vec_dot_type));
            *(void **)&gdot = dlsym(lib, name);
            if (!gdot) { /* formats without SIMD versions export only the plain name; in the x64 build it is scalar */
                snprintf(name, sizeof name, "ggml_vec_dot_%s_%s", tr->name, act_name(qd->vec_dot_type));
                *(void **)&gdot = dlsym(lib, name);
            }
        }
        double worst = 0;
        int cases = 0, same = 0;
        for (int kind = 0; kind < 4; kind++) {
            for (int nbk = 1; nbk <= 9; nbk += 4) {
                const int64_t n = 256 * nbk; /* a multiple of every block size */
                rng_state = 1000u * t + 10u * (uint64_t)kind + (uint64_t)nbk;
                float *w = malloc(n * sizeof(float)), *x = malloc(n * sizeof(float));
                float *wd = malloc(n * sizeof(float)), *xd = malloc(n * sizeof(float));
                fill(w, n, kind);
                fill(x, n, (kind + 1) % 4);
                /* Q8_1 and Q8_K are activation types without traits: size them from their structs. */
                const size_t wbytes = lw__row_size(t, n, NULL);
                const size_t act_bytes = qd->vec_dot_type == LW_TYPE_Q8_0   ? (size_t)(n / 32) * sizeof(lw__block_q8_0)
                                         : qd->vec_dot_type == LW_TYPE_Q8_1 ? (size_t)(n / 32) * sizeof(lw__block_q8_1)
                                                                            : (size_t)(n / 256) * sizeof(lw__block_q8_K);
                uint8_t *wq = malloc(wbytes), *aq = calloc(1, act_bytes);
                if (random_w) lw__iq_random_blocks(t, wq, n / LW_QK_K, rng_state);
                else CHECK(lw__quantize(t, w, wq, 1, n, NULL) == LW_OK);
                qd->act_from_float(x, aq, n);
                CHECK(lw__dequantize(t, wq, wd, n) == LW_OK);
                /* dequantize the activation row: Q8_0/Q8_1 as d * q, Q8_K as d * q */
                if (qd->vec_dot_type == LW_TYPE_Q8_K) {
                    lw__dequantize_row_q8_K(aq, xd, n);
                } else if (qd->vec_dot_type == LW_TYPE_Q8_1) {
                    lw__dequantize_row_q8_1(aq, xd, n);
                } else {
                    lw__dequantize_row_q8_0(aq, xd, n);
                }
                double ref = 0, mag = 0, extra = 0;
                for (int64_t i = 0; i < n; i++) {
                    ref += (double)wd[i] * xd[i];
                    mag += fabs((double)wd[i] * xd[i]);
                }
                /* Q8_1's s = fp16(d * sum q) is rounded to 11 bits; the min term m * s inherits that. */
                if (qd->vec_dot_type == LW_TYPE_Q8_1) {
                    const lw__block_q8_1 *ab = (const lw__block_q8_1 *)aq;
                    for (int64_t b = 0; b < n / 32; b++) {
                        const uint16_t mh = lw__rd_u16(wq + b * tr->type_size + 2);
                        extra += fabs((double)lw__fp16_to_fp32(mh)) * fabs((double)lw__fp16_to_fp32(ab[b].s)) * 1e-3;
                    }
                }
                const float got = qd->dot(n, wq, aq);
                const double bound = 1e-5 * mag + extra + 1e-30;
                const double err = fabs((double)got - ref);
                if (err / bound > worst) worst = err / bound;
                CHECK_MSG(err <= bound, "%s: dot %.9g vs dequantized %.9g (bound %.3g)", tr->name, got, ref, bound);
                cases++;
                if (gdot) {
                    float gs = NAN;
                    gdot((int)n, &gs, 0, wq, 0, aq, 0, 1);
                    uint32_t ub, gb;
                    memcpy(&ub, &got, 4);
                    memcpy(&gb, &gs, 4);
                    CHECK_MSG(ub == gb, "%s: ours %.9g != ggml generic %.9g (n %lld, kind %d)", tr->name, got, gs,
                              (long long)n, kind);
                    same += ub == gb;
                }
                free(w);
                free(x);
                free(wd);
                free(xd);
                free(wq);
                free(aq);
            }
        }
        char g[40];
        if (gdot) snprintf(g, sizeof g, "%s %d/%d", same == cases ? "ok" : "FAIL", same, cases);
        else snprintf(g, sizeof g, "- (no ggml kernel)");
        printf("%-8s %-5s | %-24.3f | %-22s\n", tr->name, act_name(qd->vec_dot_type), worst, g);
    }
    CHECK(n_types == 25);
    test_x86_activation_quantizers();
    test_x86_dots();
    test_x86_repack();
    if (lib) dlclose(lib);
    return test_summary("test-quant-dot");
}
