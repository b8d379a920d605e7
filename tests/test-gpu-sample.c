/* GPU sampling without a GPU: the scalar reference of the sampling pass (lw__gpu_sample_ref, which the kernel
 * topk.wgsl SAMPLE=1 follows step by step; tests/web/sample.test.mjs runs the kernel against it) draws the
 * tokens the CPU sampler (lw_sampler_sample) draws from the same logits with the same seed; parameter set-up
 * (flags, penalties refused, u below 1); the k cap; and the SAMPLE template's expansion through a fake HAL. */
#include "gpu-fake.h"
#include "sample/sample.h"
#include "test.h"
#include "webgpu/kernels-ops.h"

#include <math.h>

static uint32_t rnd_state = 12345;
static uint32_t rndu(void) {
    rnd_state ^= rnd_state << 13;
    rnd_state ^= rnd_state >> 17;
    rnd_state ^= rnd_state << 5;
    return rnd_state;
}
static float rndf(float lo, float hi) {
    return lo + (hi - lo) * (float)(rndu() >> 8) / 16777216.0f;
}

/* The reference against the CPU sampler over random logits and parameters: one seed per trial, 16 draws per
 * trial from both (each temperature > 0 draw takes one number from the same generator). A difference is only
 * allowed where the drawn interval's boundary lies within 1e-5 of u (f32 sums vs the CPU's double ones). */
static void test_ref_vs_cpu(void) {
    enum { N = 300, TRIALS = 300, DRAWS = 16 };
    static float logits[N];
    static uint32_t ids[N];
    int draws = 0, same = 0, near = 0, bad = 0;
    for (int t = 0; t < TRIALS; t++) {
        const float spread = t % 3 == 0 ? 2.0f : t % 3 == 1 ? 8.0f : 20.0f;
        for (int i = 0; i < N; i++) {
            logits[i] = rndf(-spread, spread);
            ids[i] = (uint32_t)i;
        }
        for (int i = 0; i < 6; i++) logits[rndu() % N] = logits[rndu() % N]; /* ties */
        lw_sampler_params sp = lw_sampler_default_params();
        sp.penalty_last_n = 0;
        static const float temps[] = {0.8f, 1.0f, 1.5f, 0.2f, 1e-4f};
        static const float tops[] = {0.95f, 1.0f, 0.5f, 0.99f};
        static const float mins[] = {0.05f, 0.0f, 0.2f};
        static const int32_t ks[] = {40, 1, 5, 256, 100};
        sp.temp = temps[t % 5];
        sp.top_p = tops[(t / 5) % 4];
        sp.min_p = mins[(t / 20) % 3];
        sp.top_k = ks[(t / 60) % 5];
        sp.seed = 1000 + (uint64_t)t;
        lw_sampler *s = NULL;
        CHECK(lw_sampler_create(N, &sp, NULL, &s) == LW_OK);
        if (!s) return;
        lw__gpu_topk_params pass2 = {N, (uint32_t)sp.top_k, 0, 0, N, 1, 1, 0};
        lw__gpu_sample_params p;
        char err[LW_ERRMSG_SIZE];
        CHECK_MSG(lw__gpu_sample_setup(&pass2, &sp, &p, err) == LW_OK, "%s", err);
        uint64_t rng[4];
        lw__sampler_rng_seed(rng, sp.seed);
        for (int d = 0; d < DRAWS; d++) {
            const int32_t cpu = lw_sampler_sample(s, logits);
            p.u = lw__gpu_sample_u(lw__sampler_rng_uniform(rng));
            uint32_t id;
            double margin;
            lw__gpu_sample_ref(ids, logits, N, &p, &id, &margin);
            draws++;
            if ((int32_t)id == cpu) same++;
            else if (margin < 1e-5) near++;
            else if (bad++ < 5)
                fprintf(stderr, "trial %d draw %d (T %g top-k %d top-p %g min-p %g): CPU %d, reference %u (margin %g)\n", t,
                        d, (double)sp.temp, sp.top_k, (double)sp.top_p, (double)sp.min_p, cpu, id, margin);
        }
        lw_sampler_free(s);
    }
    printf("reference vs CPU sampler: %d/%d draws the same, %d within 1e-5 of a boundary, %d different\n", same, draws,
           near, bad);
    CHECK(bad == 0);
    CHECK(near * 1000 <= draws); /* boundaries that close are rare: a systematic difference would show */
}

/* Hand-made cases whose answers follow from the definitions. */
static void test_ref_cases(void) {
    lw_sampler_params sp = lw_sampler_default_params();
    sp.penalty_last_n = 0;
    lw__gpu_sample_params p;
    char err[LW_ERRMSG_SIZE];
    const uint32_t ids[5] = {7, 3, 9, 1, 4};
    const float v[5] = {2.0f, 2.0f, 1.0f, -INFINITY, 0.0f};
    lw__gpu_topk_params pass2 = {5, 5, 0, 0, 5, 1, 1, 0};
    uint32_t id;
    /* temperature -> 0 with two tied best (ids 7 and 3): order by id, each half of u */
    sp.temp = 1e-6f;
    sp.top_p = 1.0f;
    sp.min_p = 0.0f;
    CHECK(lw__gpu_sample_setup(&pass2, &sp, &p, err) == LW_OK);
    p.u = 0.25f;
    CHECK(lw__gpu_sample_ref(ids, v, 5, &p, &id, NULL) == 0 && id == 3);
    p.u = 0.75f;
    CHECK(lw__gpu_sample_ref(ids, v, 5, &p, &id, NULL) == 1 && id == 7);
    /* greedy: the lower id of the tie, whatever u */
    sp.temp = 0.0f;
    CHECK(lw__gpu_sample_setup(&pass2, &sp, &p, err) == LW_OK && (p.flags & LW_GPU_SAMPLE_GREEDY));
    p.u = 0.99f;
    CHECK(lw__gpu_sample_ref(ids, v, 5, &p, &id, NULL) == 0 && id == 3);
    /* temperature 1, no cuts: p = e^2, e^2, e^1, e^0, 0 over the total; u just below 1 takes id 4 (logit 0),
     * never the -inf one */
    sp.temp = 1.0f;
    CHECK(lw__gpu_sample_setup(&pass2, &sp, &p, err) == LW_OK && p.flags == 0);
    p.u = lw__gpu_sample_u(0.9999);
    CHECK(lw__gpu_sample_ref(ids, v, 5, &p, &id, NULL) == 3 && id == 4);
    const double e2 = exp(2.0), tot = 2 * e2 + exp(1.0) + 1.0;
    p.u = (float)((2 * e2 + exp(1.0)) / tot - 1e-3); /* inside id 9's interval */
    CHECK(lw__gpu_sample_ref(ids, v, 5, &p, &id, NULL) == 2 && id == 9);
    /* min-p 0.5: keeps logits >= 2 + log(0.5): ids 3 and 7 only */
    sp.min_p = 0.5f;
    CHECK(lw__gpu_sample_setup(&pass2, &sp, &p, err) == LW_OK && (p.flags & LW_GPU_SAMPLE_MIN_P));
    p.u = lw__gpu_sample_u(0.9999);
    CHECK(lw__gpu_sample_ref(ids, v, 5, &p, &id, NULL) == 1 && id == 7);
    /* top-p 0.5: the first candidate holds e^2/tot = 0.40 < 0.5, the first two 0.80: two kept */
    sp.min_p = 0.0f;
    sp.top_p = 0.5f;
    CHECK(lw__gpu_sample_setup(&pass2, &sp, &p, err) == LW_OK && (p.flags & LW_GPU_SAMPLE_TOP_P));
    p.u = lw__gpu_sample_u(0.9999);
    CHECK(lw__gpu_sample_ref(ids, v, 5, &p, &id, NULL) == 1 && id == 7);
    sp.top_p = 0.3f; /* the first alone */
    CHECK(lw__gpu_sample_setup(&pass2, &sp, &p, err) == LW_OK);
    p.u = lw__gpu_sample_u(0.9999);
    CHECK(lw__gpu_sample_ref(ids, v, 5, &p, &id, NULL) == 0 && id == 3);
    /* top-k 3 of the 5: never id 4 */
    sp.top_p = 1.0f;
    pass2.k = 3;
    CHECK(lw__gpu_sample_setup(&pass2, &sp, &p, err) == LW_OK);
    p.u = lw__gpu_sample_u(0.9999);
    CHECK(lw__gpu_sample_ref(ids, v, 5, &p, &id, NULL) == 2 && id == 9);
    /* fewer pairs than k: the padding (-inf, none) is never drawn before a real candidate */
    pass2.k = 5;
    CHECK(lw__gpu_sample_setup(&pass2, &sp, &p, err) == LW_OK);
    p.u = lw__gpu_sample_u(0.9999);
    CHECK(lw__gpu_sample_ref(ids, v, 3, &p, &id, NULL) == 2 && id == 9);
    /* an infinite temperature: uniform over the finite candidates, never the -inf one */
    sp.temp = INFINITY;
    CHECK(lw__gpu_sample_setup(&pass2, &sp, &p, err) == LW_OK && p.inv_temp > 0.0f);
    p.u = lw__gpu_sample_u(0.9999);
    CHECK(lw__gpu_sample_ref(ids, v, 5, &p, &id, NULL) == 3 && id == 4);
    p.u = 0.3f; /* 4 equal weights: the second quarter */
    CHECK(lw__gpu_sample_ref(ids, v, 5, &p, &id, NULL) == 1 && id == 7);
    sp.temp = 1.0f;
    /* refused: penalties, NaN */
    sp.penalty_last_n = 64;
    sp.penalty_repeat = 1.1f;
    CHECK(lw__gpu_sample_setup(&pass2, &sp, &p, err) == LW_ERR_UNSUPPORTED && strstr(err, "penalt"));
    sp.penalty_repeat = 1.0f;
    CHECK(lw__gpu_sample_setup(&pass2, &sp, &p, err) == LW_OK);
    sp.temp = NAN;
    CHECK(lw__gpu_sample_setup(&pass2, &sp, &p, err) == LW_ERR_INVALID_ARG);
    /* u stays below 1 and is exact in f32 */
    CHECK(lw__gpu_sample_u(1.0 - 1e-17) < 1.0f && lw__gpu_sample_u(0.5) == 0.5f && lw__gpu_sample_u(-1) == 0.0f);
}

/* The k cap and the SAMPLE template's expansion. */
static void test_cap_and_pipeline(void) {
    lw_gpu_info ss = swiftshader_info();
    lw__gpu_topk_variant v = lw__gpu_topk_default(&ss);
    CHECK(lw__gpu_topk_max_k(&v, 512) == 256);
    CHECK(lw__gpu_topk_max_k(&v, 100) == 100);
    CHECK(lw__gpu_topk_max_k(&v, 32000) == 256);
    const uint32_t k262 = lw__gpu_topk_max_k(&v, 262144);
    CHECK(k262 == (uint32_t)v.wg_size * v.per / ((262144 + v.wg_size * v.per - 1) / (v.wg_size * v.per)));
    lw__gpu_topk_plan_out pl;
    char err[LW_ERRMSG_SIZE];
    CHECK(lw__gpu_topk_plan(&ss, &v, 262144, k262, 0, 0, 0, &pl, err) == LW_OK);
    CHECK(lw__gpu_topk_plan(&ss, &v, 262144, k262 + 1, 0, 0, 0, &pl, err) == LW_ERR_TOO_LARGE);
    /* the sampling pass's workgroup: the smallest that holds its pairs */
    CHECK(lw__gpu_sample_variant(&v, 40).wg_size == 16 && lw__gpu_sample_variant(&v, 40).per == v.per);
    CHECK(lw__gpu_sample_variant(&v, 300).wg_size == 32);
    CHECK(lw__gpu_sample_variant(&v, 4096).wg_size == v.wg_size);
    CHECK(lw__gpu_sample_variant(&v, 1000000).wg_size == v.wg_size);
    fake_gpu f = {0};
    lw_gpu gpu = {&fake_ops, &f};
    lw_gpu_pipeline p;
    CHECK_MSG(lw__gpu_sample_pipeline(&gpu, NULL, NULL, &v, &ss, &p, err) == LW_OK, "%s", err);
    CHECK(strstr(f.wgsl, "fn draw(") != NULL && strstr(f.wgsl, "min_p_log: f32") != NULL);
    CHECK(strstr(f.label, "sample") != NULL && f.n_kinds == LW_GPU_TOPK_BINDINGS);
    CHECK(lw__gpu_topk_pipeline(&gpu, NULL, NULL, &v, true, &ss, &p, err) == LW_OK);
    CHECK(strstr(f.wgsl, "fn draw(") == NULL); /* plain pass 2 is unchanged */
}

int main(void) {
    test_ref_cases();
    test_ref_vs_cpu();
    test_cap_and_pipeline();
    return test_summary("gpu-sample");
}
