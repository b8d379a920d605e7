/* Quantization formats without the ggml oracle (test-quant-oracle.c does bit-exactness): the traits table
 * agrees with the type table and the block structs, the checked wrappers reject partial blocks, negative
 * counts, NULL pointers, overflowing sizes and unknown ids without touching memory (exact-size heap buffers,
 * so ASAN sees any overrun), a few hand-decoded blocks, and quantize -> dequantize error bounds per format. */
#include "quant/quant.h"
#include "test.h"

#include "core/core.h"

#include <math.h>
#include <stdint.h>
#include <string.h>

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

/* The 28 weight formats, by id. */
static const uint32_t weight_ids[28] = {0, 1, 2, 3, 6, 7, 8, 10, 11, 12, 13, 14, 16, 17,
                                        18, 19, 20, 21, 22, 23, 29, 30, 34, 35, 39, 40, 41, 42};

/* ---------------------------------------------------------------------------------------------------------
 * Table consistency
 * ------------------------------------------------------------------------------------------------------- */

static void test_table(void) {
    for (int i = 0; i < 28; i++) {
        const lw__quant_traits_t *t = lw__quant_traits(weight_ids[i]);
        const lw_type_info *ti = lw_type_get(weight_ids[i]);
        CHECK_MSG(t && ti, "id %u missing", weight_ids[i]);
        if (!t || !ti) continue;
        CHECK(t->type == weight_ids[i]);
        CHECK_MSG(t->block_size == ti->block_size && t->type_size == ti->type_size && !strcmp(t->name, ti->name),
                  "%s: traits disagree with lw_type_get", ti->name);
        CHECK_MSG(t->to_float != NULL, "%s: no dequantize", t->name);
    }
    /* Ids that are not weight formats (removed, integer, activation-only, out of range). */
    const uint32_t not_weights[] = {4, 5, 9, 15, 24, 25, 26, 27, 28, 31, 32, 33, 36, 37, 38, 43, 1000, UINT32_MAX};
    for (size_t i = 0; i < sizeof not_weights / sizeof not_weights[0]; i++)
        CHECK_MSG(lw__quant_traits(not_weights[i]) == NULL, "id %u has traits", not_weights[i]);
    /* Struct sizes against the type table (the static asserts use literals; this ties them to it). */
    struct {
        uint32_t id;
        size_t size;
    } sizes[] = {
        {LW_TYPE_Q4_0, sizeof(lw__block_q4_0)},       {LW_TYPE_Q4_1, sizeof(lw__block_q4_1)},
        {LW_TYPE_Q5_0, sizeof(lw__block_q5_0)},       {LW_TYPE_Q5_1, sizeof(lw__block_q5_1)},
        {LW_TYPE_Q8_0, sizeof(lw__block_q8_0)},       {LW_TYPE_Q8_1, sizeof(lw__block_q8_1)},
        {LW_TYPE_Q2_K, sizeof(lw__block_q2_K)},       {LW_TYPE_Q3_K, sizeof(lw__block_q3_K)},
        {LW_TYPE_Q4_K, sizeof(lw__block_q4_K)},       {LW_TYPE_Q5_K, sizeof(lw__block_q5_K)},
        {LW_TYPE_Q6_K, sizeof(lw__block_q6_K)},       {LW_TYPE_Q8_K, sizeof(lw__block_q8_K)},
        {LW_TYPE_IQ2_XXS, sizeof(lw__block_iq2_xxs)}, {LW_TYPE_IQ2_XS, sizeof(lw__block_iq2_xs)},
        {LW_TYPE_IQ3_XXS, sizeof(lw__block_iq3_xxs)}, {LW_TYPE_IQ1_S, sizeof(lw__block_iq1_s)},
        {LW_TYPE_IQ4_NL, sizeof(lw__block_iq4_nl)},   {LW_TYPE_IQ3_S, sizeof(lw__block_iq3_s)},
        {LW_TYPE_IQ2_S, sizeof(lw__block_iq2_s)},     {LW_TYPE_IQ4_XS, sizeof(lw__block_iq4_xs)},
        {LW_TYPE_IQ1_M, sizeof(lw__block_iq1_m)},     {LW_TYPE_TQ1_0, sizeof(lw__block_tq1_0)},
        {LW_TYPE_TQ2_0, sizeof(lw__block_tq2_0)},     {LW_TYPE_MXFP4, sizeof(lw__block_mxfp4)},
        {LW_TYPE_NVFP4, sizeof(lw__block_nvfp4)},     {LW_TYPE_Q1_0, sizeof(lw__block_q1_0)},
        {LW_TYPE_Q2_0, sizeof(lw__block_q2_0)},
    };
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++)
        CHECK_MSG(lw_type_get(sizes[i].id) && lw_type_get(sizes[i].id)->type_size == sizes[i].size,
                  "struct size of type %u", sizes[i].id);
}

/* ---------------------------------------------------------------------------------------------------------
 * Checked wrappers: bad arguments never touch memory
 * ------------------------------------------------------------------------------------------------------- */

static void test_errors(void) {
    for (int i = 0; i < 28; i++) {
        const lw__quant_traits_t *t = lw__quant_traits(weight_ids[i]);
        const int64_t bs = t->block_size;
        /* One block of input and output, heap-allocated at exact sizes. */
        float *x = malloc((size_t)bs * sizeof(float));
        float *y = malloc((size_t)bs * sizeof(float));
        uint8_t *q = malloc(t->type_size);
        for (int64_t j = 0; j < bs; j++) x[j] = gauss();
        memset(q, 0xcd, t->type_size);
        if (bs > 1) {
            const int64_t odd[] = {bs - 1, bs + 1, bs / 2 + 1, 2 * bs - 1};
            for (int k = 0; k < 4; k++) {
                CHECK_MSG(lw__quantize(t->type, x, q, 1, odd[k], NULL) == LW_ERR_INVALID_ARG, "%s quantize n=%lld",
                          t->name, (long long)odd[k]);
                CHECK_MSG(lw__dequantize(t->type, q, y, odd[k]) == LW_ERR_INVALID_ARG, "%s dequantize n=%lld",
                          t->name, (long long)odd[k]);
                lw_status st = LW_OK;
                CHECK(lw__row_size(t->type, odd[k], &st) == 0 && st == LW_ERR_INVALID_ARG);
            }
            uint8_t canary[512];
            memset(canary, 0xcd, sizeof canary);
            CHECK_MSG(memcmp(q, canary, t->type_size) == 0, "%s: a refused call wrote output", t->name);
        }
        CHECK(lw__quantize(t->type, x, q, -1, bs, NULL) == LW_ERR_INVALID_ARG);
        CHECK(lw__quantize(t->type, x, q, 1, -bs, NULL) == LW_ERR_INVALID_ARG);
        CHECK(lw__dequantize(t->type, q, y, -bs) == LW_ERR_INVALID_ARG);
        CHECK(lw__dequantize(t->type, NULL, y, bs) == LW_ERR_INVALID_ARG);
        CHECK(lw__dequantize(t->type, q, NULL, bs) == LW_ERR_INVALID_ARG);
        /* Zero elements: OK and nothing touched, even with NULL pointers. */
        CHECK(lw__quantize(t->type, NULL, NULL, 0, bs, NULL) == LW_OK);
        CHECK(lw__quantize(t->type, NULL, NULL, 5, 0, NULL) == LW_OK);
        CHECK(lw__dequantize(t->type, NULL, NULL, 0) == LW_OK);
        /* Sizes that overflow. */
        CHECK_MSG(lw__quantize(t->type, x, q, INT64_MAX / 2, 4 * bs, NULL) == LW_ERR_OVERFLOW, "%s overflow",
                  t->name);
        lw_status st = LW_OK;
        const int64_t big = INT64_MAX - INT64_MAX % bs;
        const size_t rs = lw__row_size(t->type, big, &st);
        const bool fits = (uint64_t)(big / bs) <= SIZE_MAX / t->type_size;
        CHECK_MSG(fits ? (st == LW_OK && rs == (size_t)(big / bs) * t->type_size) : (st == LW_ERR_OVERFLOW && rs == 0),
                  "%s row_size(huge)", t->name);
        if (t->quantize) {
            if (t->requires_imatrix) {
                CHECK(lw__quantize(t->type, x, q, 1, bs, NULL) == LW_ERR_INVALID_ARG);
            } else {
                CHECK(lw__quantize(t->type, x, q, 1, bs, NULL) == LW_OK);
                CHECK(lw__quantize(t->type, NULL, q, 1, bs, NULL) == LW_ERR_INVALID_ARG);
                CHECK(lw__quantize(t->type, x, NULL, 1, bs, NULL) == LW_ERR_INVALID_ARG);
            }
        } else {
            CHECK(lw__quantize(t->type, x, q, 1, bs, NULL) == LW_ERR_UNSUPPORTED);
        }
        free(x);
        free(y);
        free(q);
    }
    float f = 0;
    uint8_t b[4] = {0};
    const uint32_t bad[] = {4, 9, 15, 24, 43, 1000, UINT32_MAX};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        CHECK(lw__quantize(bad[i], &f, b, 1, 1, NULL) == LW_ERR_BAD_TENSOR_TYPE);
        CHECK(lw__dequantize(bad[i], b, &f, 1) == LW_ERR_BAD_TENSOR_TYPE);
        lw_status st = LW_OK;
        CHECK(lw__row_size(bad[i], 256, &st) == 0 && st == LW_ERR_BAD_TENSOR_TYPE);
    }
}

/* ---------------------------------------------------------------------------------------------------------
 * Hand-decoded blocks (from the format definitions, not from our code)
 * ------------------------------------------------------------------------------------------------------- */

static void test_known_blocks(void) {
    /* Q4_0, d = 0.5 (fp16 0x3800): byte 0 = 0x1f -> element 0 = (15-8)*0.5, element 16 = (1-8)*0.5. */
    uint8_t q40[18] = {0x00, 0x38, 0x1f};
    float y[256];
    CHECK(lw__dequantize(LW_TYPE_Q4_0, q40, y, 32) == LW_OK);
    CHECK(y[0] == 3.5f && y[16] == -3.5f && y[1] == -4.0f && y[17] == -4.0f);
    /* Q8_0, d = 2 (0x4000): q = -3 -> -6. */
    uint8_t q80[34] = {0x00, 0x40, 0xfd};
    CHECK(lw__dequantize(LW_TYPE_Q8_0, q80, y, 32) == LW_OK);
    CHECK(y[0] == -6.0f && y[1] == 0.0f);
    /* Q5_0, d = 1: qh bit 0 set, low nibble 0 -> q = 16 -> 0; element 1: q = 0 -> -16. */
    uint8_t q50[22] = {0x00, 0x3c, 0x01, 0, 0, 0};
    CHECK(lw__dequantize(LW_TYPE_Q5_0, q50, y, 32) == LW_OK);
    CHECK(y[0] == 0.0f && y[1] == -16.0f);
    /* MXFP4, e = 127 (scale 1 for E2M1 values): code 7 = 6.0, code 0xf = -6.0. */
    uint8_t mx[17] = {127, 0xf7};
    CHECK(lw__dequantize(LW_TYPE_MXFP4, mx, y, 32) == LW_OK);
    CHECK(y[0] == 6.0f && y[16] == -6.0f);
    /* Q6_K, d = 1, all scales 1, ql = qh = 0 -> every value (0 - 32) * 1 = -32. */
    lw__block_q6_K b6;
    memset(&b6, 0, sizeof b6);
    memset(b6.scales, 1, sizeof b6.scales);
    b6.d = 0x3c00;
    CHECK(lw__dequantize(LW_TYPE_Q6_K, &b6, y, 256) == LW_OK);
    CHECK(y[0] == -32.0f && y[255] == -32.0f);
    /* TQ2_0, d = 1: code 2 -> +1, code 0 -> -1; byte 0 = 0x02 -> element 0 = +1, element 32 = -1. */
    lw__block_tq2_0 t2;
    memset(&t2, 0, sizeof t2);
    t2.qs[0] = 0x02;
    t2.d = 0x3c00;
    CHECK(lw__dequantize(LW_TYPE_TQ2_0, &t2, y, 256) == LW_OK);
    CHECK(y[0] == 1.0f && y[32] == -1.0f && y[1] == -1.0f);
}

/* ---------------------------------------------------------------------------------------------------------
 * Round trip: relative RMS error of quantize -> dequantize on Gaussian data
 * ------------------------------------------------------------------------------------------------------- */

static void test_roundtrip(void) {
    /* Upper bounds on RMS(error)/RMS(x) for N(0,1) weights, about 1.5x what the formats achieve. */
    static const struct {
        uint32_t id;
        double max_rel;
    } bounds[] = {
        {LW_TYPE_F32, 0.0},     {LW_TYPE_F16, 0.001},   {LW_TYPE_BF16, 0.005},  {LW_TYPE_Q8_0, 0.01},
        {LW_TYPE_Q5_0, 0.06},   {LW_TYPE_Q5_1, 0.06},   {LW_TYPE_Q4_0, 0.13},   {LW_TYPE_Q4_1, 0.13},
        {LW_TYPE_Q6_K, 0.03},   {LW_TYPE_Q5_K, 0.05},   {LW_TYPE_Q4_K, 0.10},   {LW_TYPE_Q3_K, 0.25},
        {LW_TYPE_Q2_K, 0.45},   {LW_TYPE_MXFP4, 0.25},  {LW_TYPE_NVFP4, 0.20},  {LW_TYPE_TQ2_0, 0.90},
        {LW_TYPE_TQ1_0, 0.90},  {LW_TYPE_Q2_0, 0.80},   {LW_TYPE_Q1_0, 0.80},   {LW_TYPE_IQ4_NL, 0.13},
        {LW_TYPE_IQ4_XS, 0.13},
    };
    const int64_t n = 4096;
    float *x = malloc(n * sizeof(float)), *y = malloc(n * sizeof(float));
    uint8_t *q = malloc(n * 4);
    rng_state = 99;
    for (int64_t i = 0; i < n; i++) x[i] = gauss();
    for (size_t b = 0; b < sizeof bounds / sizeof bounds[0]; b++) {
        const lw__quant_traits_t *t = lw__quant_traits(bounds[b].id);
        if (!t || !t->quantize) continue;
        CHECK(lw__quantize(t->type, x, q, 2, n / 2, NULL) == LW_OK);
        CHECK(lw__dequantize(t->type, q, y, n) == LW_OK);
        double se = 0, sx = 0;
        for (int64_t i = 0; i < n; i++) {
            se += (double)(y[i] - x[i]) * (y[i] - x[i]);
            sx += (double)x[i] * x[i];
        }
        const double rel = sqrt(se / sx);
        printf("  %-8s rel rms error %.4f (bound %.3f)\n", t->name, rel, bounds[b].max_rel);
        CHECK_MSG(rel <= bounds[b].max_rel, "%s: rel rms error %.4f > %.3f", t->name, rel, bounds[b].max_rel);
    }
    free(x);
    free(y);
    free(q);
}

int main(void) {
    test_table();
    test_errors();
    test_known_blocks();
    test_roundtrip();
    return test_summary("test-quant");
}
