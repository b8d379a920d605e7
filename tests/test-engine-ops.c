/* CPU kernels: every faster kernel set gives the scalar references' bits on random data of every length
 * around the SIMD block sizes; the references themselves are checked against plain double-precision sums
 * (their orders differ from a sequential sum, so within a rounding bound) and against hand-worked cases. */
#include "cpu/engine-ops.h"
#include "test.h"

#include <math.h>

static uint64_t seed = 88172645463325252ull;
static float frand(void) {
    seed ^= seed << 13;
    seed ^= seed >> 7;
    seed ^= seed << 17;
    return (float)((double)(seed >> 11) / 9007199254740992.0 * 2.0 - 1.0);
}

static int same_bits(float a, float b) {
    return !memcmp(&a, &b, sizeof(float));
}

static void test_reference_values(const lw__cpu_kernels *R) {
    /* hand-worked: sums of small integers are exact in every order */
    float x[200], y[200];
    uint16_t hx[200], hy[200];
    for (int i = 0; i < 200; i++) {
        x[i] = (float)(i % 7) - 3.0f;
        y[i] = (float)(i % 5) - 2.0f;
        hx[i] = lw__fp32_to_fp16(x[i]);
        hy[i] = lw__fp32_to_fp16(y[i]);
    }
    for (int n = 1; n <= 200; n += 13) {
        double e = 0;
        for (int i = 0; i < n; i++) e += (double)x[i] * y[i];
        CHECK(R->dot_f32(n, x, y) == (float)e);
        CHECK(R->dot_f16(n, hx, hy) == (float)e);
        if (n % 16 == 0) CHECK(R->dot_f32_gemm(n, x, y) == (float)e);
    }
    /* random data: within a rounding bound of the exact sum */
    for (int n = 1; n <= 300; n++) {
        float a[300], b[300];
        double e = 0, mag = 0;
        for (int i = 0; i < n; i++) {
            a[i] = frand();
            b[i] = frand();
            e += (double)a[i] * b[i];
            mag += fabs((double)a[i] * b[i]);
        }
        double bound = 1.2e-7 * 16 * mag + 1e-30;
        CHECK_MSG(fabs(R->dot_f32(n, a, b) - e) <= bound, "dot_f32 n=%d", n);
        if (n % 16 == 0) CHECK_MSG(fabs(R->dot_f32_gemm(n, a, b) - e) <= bound, "dot_f32_gemm n=%d", n);
    }
    /* f16 helpers */
    uint16_t h[3] = {lw__fp32_to_fp16(1.0f), lw__fp32_to_fp16(-2.0f), lw__fp32_to_fp16(0.5f)};
    uint16_t v[3] = {lw__fp32_to_fp16(4.0f), lw__fp32_to_fp16(1.0f), lw__fp32_to_fp16(-1.0f)};
    R->mad_f16(h, v, 0.25f, 3); /* 2, -1.75, 0.25 */
    CHECK(lw__fp16_to_fp32(h[0]) == 2.0f && lw__fp16_to_fp32(h[1]) == -1.75f && lw__fp16_to_fp32(h[2]) == 0.25f);
    R->scale_f16(h, 3.0f, 3); /* 6, -5.25, 0.75 */
    CHECK(lw__fp16_to_fp32(h[0]) == 6.0f && lw__fp16_to_fp32(h[1]) == -5.25f && lw__fp16_to_fp32(h[2]) == 0.75f);
    float f[3] = {1.0f / 3.0f, 65504.0f, -0.0f};
    R->f32_to_f16(f, h, 3);
    CHECK(h[0] == 0x3555 && h[1] == 0x7bff && h[2] == 0x8000);
}

/* A faster kernel set against the references, bit for bit. */
static void test_same_as_reference(const lw__cpu_kernels *K, const lw__cpu_kernels *R) {
    enum { N = 300 };
    float a[N], b[N], fa[N], fb[N];
    uint16_t ha[N], hb[N], y1[N], y2[N];
    int bad = 0;
    for (int rep = 0; rep < 20; rep++) {
        float scale = rep % 3 == 0 ? 1.0f : rep % 3 == 1 ? 1e-3f : 300.0f;
        for (int i = 0; i < N; i++) {
            a[i] = frand() * scale;
            b[i] = frand();
            ha[i] = lw__fp32_to_fp16(a[i]);
            hb[i] = lw__fp32_to_fp16(b[i]);
        }
        for (int n = 1; n <= N; n++) {
            bad += !same_bits(K->dot_f32(n, a, b), R->dot_f32(n, a, b));
            bad += !same_bits(K->dot_f16(n, ha, hb), R->dot_f16(n, ha, hb));
            if (n % 16 == 0) {
                bad += !same_bits(K->dot_f32_gemm(n, a, b), R->dot_f32_gemm(n, a, b));
                bad += !same_bits(K->dot_f16_gemm(n, ha, hb), R->dot_f16_gemm(n, ha, hb));
            }
        }
        for (int n = 1; n <= 70; n++) {
            K->f32_to_f16(a, y1, n);
            R->f32_to_f16(a, y2, n);
            bad += memcmp(y1, y2, (size_t)n * 2) != 0;
            K->f16_to_f32(ha, fa, n);
            R->f16_to_f32(ha, fb, n);
            bad += memcmp(fa, fb, (size_t)n * 4) != 0;
            memcpy(y1, hb, sizeof(hb));
            memcpy(y2, hb, sizeof(hb));
            float v = frand() * 2.0f;
            K->mad_f16(y1, ha, v, n);
            R->mad_f16(y2, ha, v, n);
            bad += memcmp(y1, y2, (size_t)n * 2) != 0;
            K->scale_f16(y1, v, n);
            R->scale_f16(y2, v, n);
            bad += memcmp(y1, y2, (size_t)n * 2) != 0;
        }
    }
    /* the blocked products: every (row, token) output equals the single gemm-order dot */
    enum { K_ = 96, M_ = 11, T_ = 9 };
    static float wf[M_ * K_], af[T_ * K_], c1[T_ * 13];
    static uint16_t wh[M_ * K_], ah[T_ * K_];
    for (int i = 0; i < M_ * K_; i++) wf[i] = frand(), wh[i] = lw__fp32_to_fp16(wf[i]);
    for (int i = 0; i < T_ * K_; i++) af[i] = frand(), ah[i] = lw__fp32_to_fp16(af[i]);
    for (int f16 = 0; f16 < 2; f16++) {
        if (!(f16 ? K->gemm_f16 : K->gemm_f32)) continue; /* optional */
        for (int m = 1; m <= M_; m++)
            for (int t = 1; t <= T_; t++) {
                for (int i = 0; i < T_ * 13; i++) c1[i] = -1.0f;
                if (f16) K->gemm_f16(K_, wh, K_ * 2, m, ah, K_ * 2, t, c1, 13);
                else K->gemm_f32(K_, wf, K_ * 4, m, af, K_ * 4, t, c1, 13);
                for (int y = 0; y < t; y++) {
                    for (int x = 0; x < m; x++) {
                        float e = f16 ? R->dot_f16_gemm(K_, wh + x * K_, ah + y * K_) : R->dot_f32_gemm(K_, wf + x * K_, af + y * K_);
                        bad += !same_bits(c1[y * 13 + x], e);
                    }
                    for (int x = m; x < 13; x++) bad += c1[y * 13 + x] != -1.0f; /* nothing outside the block */
                }
            }
    }
    /* tiled attention pieces (head sizes are multiples of 16 there) */
    for (int D = 16; D <= 128; D += 16) {
        static float Kt[128 * 64], V[64 * 128], q[128], k1[64], k2[64], v1[128], v2[128];
        for (int i = 0; i < D * 64; i++) Kt[i] = frand(), V[i] = frand();
        for (int i = 0; i < D; i++) q[i] = frand(), v1[i] = v2[i] = frand();
        K->fa_kq(D, Kt, q, k1);
        R->fa_kq(D, Kt, q, k2);
        for (int j = 0; j < 64; j++) bad += !same_bits(k1[j], k2[j]);
        /* scores spread over exp's range, with masked cells and extremes */
        for (int j = 0; j < 64; j++) k1[j] = k2[j] = j % 9 == 8 ? -INFINITY : frand() * (j < 8 ? 300.0f : 20.0f);
        double s1 = K->fa_softmax(k1, 3.0f), s2 = R->fa_softmax(k2, 3.0f);
        bad += s1 != s2;
        for (int j = 0; j < 64; j++) bad += !same_bits(k1[j], k2[j]);
        for (int m = 1; m <= 64; m += 21) {
            K->fa_vacc(D, m, V, k1, v1);
            R->fa_vacc(D, m, V, k1, v2);
            for (int d = 0; d < D; d++) bad += !same_bits(v1[d], v2[d]);
        }
    }
    /* SwiGLU's exponentials over exp's whole range: subnormal and overflowing results, infinities */
    {
        static float x[256], g[256], z1[256], z2[256];
        for (int i = 0; i < 256; i++) x[i] = frand() * (i < 64 ? 250.0f : 30.0f), g[i] = frand();
        x[3] = INFINITY, x[4] = -INFINITY, x[5] = 0.0f, x[6] = -0.0f, x[7] = 88.5f, x[8] = -103.9f;
        K->swiglu16(z1, x, g, 256);
        R->swiglu16(z2, x, g, 256);
        for (int i = 0; i < 256; i++) bad += !same_bits(z1[i], z2[i]);
    }
    printf("kernels '%s' vs '%s': %d mismatches\n", K->name, R->name, bad);
    CHECK(bad == 0);
}

int main(void) {
    const lw__cpu_kernels *R = lw__cpu_kernels_ref(), *best = lw__cpu_kernels_best(), *x86 = lw__cpu_kernels_x86();
    printf("best kernels here: %s\n", best->name);
    test_reference_values(R);
    if (x86) test_same_as_reference(x86, R);
    else printf("no x86 SIMD kernels on this machine: only the references are tested\n");
    const lw__cpu_kernels *avx2 = lw__cpu_kernels_x86_avx2();
    if (avx2 && avx2 != x86) test_same_as_reference(avx2, R);
    CHECK(lw__cpu_mm_get(LW_TYPE_F32) && lw__cpu_mm_get(LW_TYPE_F16));
    CHECK(lw__cpu_mm_get(LW_TYPE_F16)->vec_dot_type == LW_TYPE_F16); /* f16 weights: f16 activations */
    CHECK(lw__cpu_mm_get(LW_TYPE_COUNT) == NULL);
    return test_summary("test-engine-ops");
}
