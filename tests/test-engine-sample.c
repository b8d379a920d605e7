/* Samplers: greedy, truncations (top-k, top-p, min-p), penalties, temperature, seeded reproducibility and
 * the drawn distribution, each checked against values worked out from the definitions. */
#include "sample/sample.h"
#include "test.h"

#include <math.h>

/* A sampler with everything off except what the test sets. */
static lw_sampler_params plain(void) {
    lw_sampler_params p = lw_sampler_default_params();
    p.temp = 1.0f;
    p.top_k = 0;
    p.top_p = 1.0f;
    p.min_p = 0.0f;
    p.penalty_last_n = 0;
    return p;
}

/* Draws n tokens and counts them into cnt[n_vocab]. */
static void draw(lw_sampler *s, const float *logits, int n, int *cnt) {
    for (int i = 0; i < n; i++) {
        int32_t id = lw_sampler_sample(s, logits);
        cnt[id]++;
    }
}

static void test_greedy(void) {
    float logits[6] = {0.5f, 3.0f, -1.0f, 2.9f, 3.0f, 0.0f};
    lw_sampler_params p = plain();
    p.temp = 0.0f;
    lw_sampler *s;
    CHECK(lw_sampler_create(6, &p, NULL, &s) == LW_OK);
    CHECK(lw_sampler_sample(s, logits) == 1); /* tie 1 vs 4: lowest id, as a stable argmax */
    logits[3] = 3.5f;
    CHECK(lw_sampler_sample(s, logits) == 3);
    lw_sampler_free(s);
}

/* log-probabilities p = {0.5, 0.3, 0.15, 0.05} as logits */
static void probs_logits(float *l) {
    const float p[4] = {0.5f, 0.3f, 0.15f, 0.05f};
    for (int i = 0; i < 4; i++) l[i] = logf(p[i]);
}

static void test_distribution(void) {
    float l[4];
    probs_logits(l);
    lw_sampler_params p = plain();
    lw_sampler *s;
    CHECK(lw_sampler_create(4, &p, NULL, &s) == LW_OK);
    int cnt[4] = {0};
    const int N = 40000;
    draw(s, l, N, cnt);
    const double want[4] = {0.5, 0.3, 0.15, 0.05};
    for (int i = 0; i < 4; i++) {
        double f = (double)cnt[i] / N, sd = sqrt(want[i] * (1 - want[i]) / N);
        CHECK_MSG(fabs(f - want[i]) < 5 * sd, "token %d: frequency %.4f, expected %.4f", i, f, want[i]);
    }
    lw_sampler_free(s);

    /* temperature 0.5 squares the probabilities (renormalized): {.25, .09, .0225, .0025} / .365 */
    p.temp = 0.5f;
    CHECK(lw_sampler_create(4, &p, NULL, &s) == LW_OK);
    int c2[4] = {0};
    draw(s, l, N, c2);
    const double w2[4] = {0.25 / 0.365, 0.09 / 0.365, 0.0225 / 0.365, 0.0025 / 0.365};
    for (int i = 0; i < 4; i++) {
        double f = (double)c2[i] / N, sd = sqrt(w2[i] * (1 - w2[i]) / N);
        CHECK_MSG(fabs(f - w2[i]) < 5 * sd + 1e-4, "temp 0.5 token %d: frequency %.4f, expected %.4f", i, f, w2[i]);
    }
    lw_sampler_free(s);
}

static void test_truncation(void) {
    float l[4];
    probs_logits(l);
    lw_sampler *s;
    int cnt[4];

    /* top-k 2: only tokens 0 and 1, in ratio 0.5 : 0.3 */
    lw_sampler_params p = plain();
    p.top_k = 2;
    CHECK(lw_sampler_create(4, &p, NULL, &s) == LW_OK);
    memset(cnt, 0, sizeof(cnt));
    draw(s, l, 8000, cnt);
    CHECK(cnt[2] == 0 && cnt[3] == 0);
    CHECK_MSG(fabs((double)cnt[0] / 8000 - 0.625) < 0.03, "top-k ratio %d %d", cnt[0], cnt[1]);
    lw_sampler_free(s);

    /* top-p 0.7: cumulative 0.5 < 0.7 <= 0.8, so {0, 1} */
    p = plain();
    p.top_p = 0.7f;
    CHECK(lw_sampler_create(4, &p, NULL, &s) == LW_OK);
    memset(cnt, 0, sizeof(cnt));
    draw(s, l, 4000, cnt);
    CHECK(cnt[0] > 0 && cnt[1] > 0 && cnt[2] == 0 && cnt[3] == 0);
    lw_sampler_free(s);

    /* top-p 0.85: {0, 1, 2} (0.8 < 0.85 <= 0.95) */
    p.top_p = 0.85f;
    CHECK(lw_sampler_create(4, &p, NULL, &s) == LW_OK);
    memset(cnt, 0, sizeof(cnt));
    draw(s, l, 4000, cnt);
    CHECK(cnt[2] > 0 && cnt[3] == 0);
    lw_sampler_free(s);

    /* min-p 0.5: keep p >= 0.25, i.e. {0, 1}; min-p 0.2: p >= 0.1, {0, 1, 2} */
    p = plain();
    p.min_p = 0.5f;
    CHECK(lw_sampler_create(4, &p, NULL, &s) == LW_OK);
    memset(cnt, 0, sizeof(cnt));
    draw(s, l, 4000, cnt);
    CHECK(cnt[0] > 0 && cnt[1] > 0 && cnt[2] == 0 && cnt[3] == 0);
    lw_sampler_free(s);
    p.min_p = 0.2f;
    CHECK(lw_sampler_create(4, &p, NULL, &s) == LW_OK);
    memset(cnt, 0, sizeof(cnt));
    draw(s, l, 4000, cnt);
    CHECK(cnt[2] > 0 && cnt[3] == 0);
    lw_sampler_free(s);

    /* top-k 1 is greedy whatever the temperature */
    p = plain();
    p.top_k = 1;
    p.temp = 5.0f;
    CHECK(lw_sampler_create(4, &p, NULL, &s) == LW_OK);
    memset(cnt, 0, sizeof(cnt));
    draw(s, l, 500, cnt);
    CHECK(cnt[0] == 500);
    lw_sampler_free(s);
}

static void test_sort_many(void) {
    /* top-k on a large vocabulary picks exactly the k largest (checked by brute force) */
    enum { V = 5000, K = 37 };
    static float l[V];
    uint32_t x = 99;
    for (int i = 0; i < V; i++) {
        x = x * 1103515245u + 12345u;
        l[i] = (float)((x >> 8) % 1000) * 0.01f; /* many ties */
    }
    float kth; /* the K-th largest value */
    {
        static float c[V];
        memcpy(c, l, sizeof(l));
        for (int i = 0; i < K; i++)
            for (int j = i + 1; j < V; j++)
                if (c[j] > c[i]) {
                    float t = c[i];
                    c[i] = c[j];
                    c[j] = t;
                }
        kth = c[K - 1];
    }
    lw_sampler_params p = plain();
    p.top_k = K;
    p.temp = 100.0f; /* nearly uniform over the kept ones */
    lw_sampler *s;
    CHECK(lw_sampler_create(V, &p, NULL, &s) == LW_OK);
    int bad = 0;
    for (int i = 0; i < 3000; i++) bad += l[lw_sampler_sample(s, l)] < kth;
    CHECK_MSG(bad == 0, "%d draws outside the top %d", bad, K);
    lw_sampler_free(s);
}

static void test_penalties(void) {
    lw_sampler_params p = plain();
    p.temp = 0.0f;
    p.penalty_last_n = 3;
    p.penalty_repeat = 1.5f;
    lw_sampler *s;
    float l[3] = {2.0f, 1.9f, -1.0f};
    CHECK(lw_sampler_create(3, &p, NULL, &s) == LW_OK);
    CHECK(lw_sampler_sample(s, l) == 0);
    lw_sampler_accept(s, 0); /* 2.0 / 1.5 = 1.33 < 1.9 */
    CHECK(lw_sampler_sample(s, l) == 1);
    lw_sampler_accept(s, 1); /* 1.9 / 1.5 = 1.27 < 1.33: back to 0 */
    CHECK(lw_sampler_sample(s, l) == 0);
    /* the window is 3: after three more of token 2, tokens 0 and 1 are forgotten */
    lw_sampler_accept(s, 2);
    lw_sampler_accept(s, 2);
    lw_sampler_accept(s, 2);
    float l2[3] = {2.0f, 1.9f, -1.0f};
    CHECK(lw_sampler_sample(s, l2) == 0);
    lw_sampler_free(s);

    /* negative logits are multiplied: -1 * 1.5 = -1.5 < -1.2 */
    float l3[2] = {-1.0f, -1.2f};
    CHECK(lw_sampler_create(2, &p, NULL, &s) == LW_OK);
    lw_sampler_accept(s, 0);
    CHECK(lw_sampler_sample(s, l3) == 1);
    lw_sampler_free(s);

    /* frequency: 2.0 - 3 * 0.2 = 1.4 < 1.5; presence alone: 2.0 - 0.4 = 1.6 > 1.5 */
    p = plain();
    p.temp = 0.0f;
    p.penalty_last_n = 8;
    p.penalty_freq = 0.2f;
    float l4[2] = {2.0f, 1.5f};
    CHECK(lw_sampler_create(2, &p, NULL, &s) == LW_OK);
    for (int i = 0; i < 3; i++) lw_sampler_accept(s, 0);
    CHECK(lw_sampler_sample(s, l4) == 1);
    lw_sampler_free(s);
    p.penalty_freq = 0.0f;
    p.penalty_present = 0.4f;
    CHECK(lw_sampler_create(2, &p, NULL, &s) == LW_OK);
    for (int i = 0; i < 3; i++) lw_sampler_accept(s, 0);
    CHECK(lw_sampler_sample(s, l4) == 0);
    p.penalty_present = 0.6f; /* 1.4 < 1.5 */
    lw_sampler_free(s);
    CHECK(lw_sampler_create(2, &p, NULL, &s) == LW_OK);
    lw_sampler_accept(s, 0);
    CHECK(lw_sampler_sample(s, l4) == 1);
    lw_sampler_reset(s, 1); /* forgetting the history removes the penalty */
    CHECK(lw_sampler_sample(s, l4) == 0);
    lw_sampler_free(s);
}

static void test_seeds(void) {
    float l[16];
    for (int i = 0; i < 16; i++) l[i] = (float)(i % 5) * 0.3f;
    lw_sampler_params p = plain();
    p.seed = 1234;
    lw_sampler *a, *b, *c;
    CHECK(lw_sampler_create(16, &p, NULL, &a) == LW_OK);
    CHECK(lw_sampler_create(16, &p, NULL, &b) == LW_OK);
    p.seed = 1235;
    CHECK(lw_sampler_create(16, &p, NULL, &c) == LW_OK);
    int same_ab = 1, same_ac = 1;
    int32_t first[64];
    for (int i = 0; i < 64; i++) {
        int32_t x = lw_sampler_sample(a, l), y = lw_sampler_sample(b, l), z = lw_sampler_sample(c, l);
        first[i] = x;
        same_ab &= x == y;
        same_ac &= x == z;
    }
    CHECK(same_ab);
    CHECK(!same_ac);
    lw_sampler_reset(a, 1234); /* reset replays the sequence */
    int replay = 1;
    for (int i = 0; i < 64; i++) replay &= lw_sampler_sample(a, l) == first[i];
    CHECK(replay);
    lw_sampler_free(a);
    lw_sampler_free(b);
    lw_sampler_free(c);

    CHECK(lw_sampler_create(0, &p, NULL, &a) == LW_ERR_INVALID_ARG);
    CHECK(a == NULL);
}

int main(void) {
    test_greedy();
    test_distribution();
    test_truncation();
    test_sort_many();
    test_penalties();
    test_seeds();
    return test_summary("test-engine-sample");
}
