/* `llamaweb bench-kernels [--n 4096] [--rows 4096] [--types q4_0,q4_K,...|all] [--seconds S]`: single-thread
 * mat-vec throughput per weight format — the portable scalar reference, the scalar kernel in llama.cpp's x86
 * summation order, and its SIMD version — printed as GB/s of weights read and GFLOP/s, with the ratio to this
 * machine's memory read bandwidth measured in the same run (the anchor). Decode is a mat-vec per weight, so
 * "GB/s vs read bandwidth" says how close a format gets to the memory-bound limit.
 *
 * Matrices are replicated until the working set exceeds any cache (>= 512 MiB), so the numbers are
 * DRAM-bound like real decoding, not cache-resident. */
#include "cli.h"
#include "cpu/quant-dot.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define WORKING_SET ((size_t)512 << 20) /* bytes of weights cycled through: beyond last-level caches */

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* ---------------------------------------------------------------------------------------------------------
 * The anchor: single-thread read bandwidth (integer sum over the working set; vectorizes at -O2/-O3).
 * ------------------------------------------------------------------------------------------------------- */

static volatile uint64_t sink;

static double read_bandwidth(const uint8_t *buf, size_t bytes, double seconds) {
    const uint64_t *p = (const uint64_t *)buf;
    size_t n = bytes / 8;
    double best = 0, t_end = now_s() + seconds;
    do {
        double t0 = now_s();
        uint64_t s0 = 0, s1 = 0, s2 = 0, s3 = 0;
        for (size_t i = 0; i + 4 <= n; i += 4) s0 += p[i], s1 += p[i + 1], s2 += p[i + 2], s3 += p[i + 3];
        sink = s0 + s1 + s2 + s3;
        double gbs = (double)bytes / (now_s() - t0) / 1e9;
        if (gbs > best) best = gbs;
    } while (now_s() < t_end);
    return best;
}

/* ---------------------------------------------------------------------------------------------------------
 * One format
 * ------------------------------------------------------------------------------------------------------- */

typedef struct mv {
    const uint8_t *w; /* n_mats copies of a rows x n weight matrix, back to back */
    size_t mat_bytes; /* bytes of one copy                                        */
    size_t row_bytes; /* bytes of one row                                         */
    int n_mats;       /* copies                                                   */
    int64_t n, rows;  /* shape                                                    */
} mv;

/* Best-of mat-vec time (seconds) for a dot function over successive copies, for at least `seconds`. */
static double time_matvec(const mv *m, lw__vec_dot_fn dot, const void *act, float *y, double seconds) {
    double best = 1e30, t_end = now_s() + seconds;
    int k = 0;
    do {
        const uint8_t *w = m->w + (size_t)(k++ % m->n_mats) * m->mat_bytes;
        double t0 = now_s();
        for (int64_t r = 0; r < m->rows; r++) y[r] = dot(m->n, w + (size_t)r * m->row_bytes, act);
        double t = now_s() - t0;
        if (t < best) best = t;
    } while (now_s() < t_end || k < 3);
    return best;
}

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static float rnd(void) { /* roughly normal: sum of 4 uniforms, centred */
    float s = 0;
    for (int i = 0; i < 4; i++) {
        rng_state ^= rng_state << 13, rng_state ^= rng_state >> 7, rng_state ^= rng_state << 17;
        s += (float)(rng_state >> 40) / (float)(1u << 24);
    }
    return (s - 2.0f) * 0.05f;
}

static int bench_type(uint32_t type, int64_t n, int64_t rows, double seconds, double anchor) {
    const lw__quant_dot_t *qd = lw__quant_dot(type);
    const lw__quant_traits_t *tr = lw__quant_traits(type);
    if (!qd || !tr || !tr->quantize) {
        fprintf(stderr, "bench-kernels: %s has no quantized dot product\n", tr ? tr->name : "?");
        return 1;
    }
    lw_status st = LW_OK;
    const lw_type_info *wt = lw_type_get(type), *at = lw_type_get(qd->vec_dot_type);
    if (n % wt->block_size || n % at->block_size) {
        fprintf(stderr, "bench-kernels: %s: %lld is not a whole number of blocks\n", tr->name, (long long)n);
        return 1;
    }
    size_t row_bytes = (size_t)(n / wt->block_size) * wt->type_size; /* n <= 2^20: no overflow */
    size_t act_bytes = (size_t)(n / at->block_size) * at->type_size;
    mv m = {NULL, row_bytes * (size_t)rows, row_bytes, 0, n, rows};
    m.n_mats = (int)((WORKING_SET + m.mat_bytes - 1) / m.mat_bytes);
    uint8_t *w = malloc(m.mat_bytes * (size_t)m.n_mats);
    float *src = malloc(sizeof(float) * (size_t)n * 64), *x = malloc(sizeof(float) * (size_t)n);
    float *imat = malloc(sizeof(float) * (size_t)n), *y = malloc(sizeof(float) * (size_t)rows);
    uint8_t *act_ref = malloc(act_bytes), *act_x86 = malloc(act_bytes);
    if (!w || !src || !x || !imat || !y || !act_ref || !act_x86) {
        fprintf(stderr, "bench-kernels: out of memory\n");
        return 1;
    }
    for (int64_t i = 0; i < n; i++) imat[i] = 1.0f, x[i] = rnd() * 20;
    /* Quantize one copy in chunks of 64 rows (an imatrix of ones for formats that need one), replicate. */
    for (int64_t r = 0; r < rows; r += 64) {
        int64_t nr = rows - r < 64 ? rows - r : 64;
        for (int64_t i = 0; i < nr * n; i++) src[i] = rnd();
        st = lw__quantize(type, src, w + (size_t)r * row_bytes, nr, n, tr->requires_imatrix ? imat : NULL);
        if (st != LW_OK) {
            fprintf(stderr, "bench-kernels: %s: quantize failed (%s)\n", tr->name, lw_status_str(st));
            return 1;
        }
    }
    for (int k = 1; k < m.n_mats; k++) memcpy(w + (size_t)k * m.mat_bytes, w, m.mat_bytes);
    m.w = w;

    /* The selector hands out the SIMD version unless LW_CPU_KERNELS=scalar: ask twice to get both. */
    const char *prev = getenv("LW_CPU_KERNELS");
    char saved[64];
    snprintf(saved, sizeof saved, "%s", prev ? prev : "");
    setenv("LW_CPU_KERNELS", "scalar", 1);
    lw__vec_dot_fn x86 = lw__quant_dot_x86(type, false, rows % 8 == 0, false);
    if (prev)
        setenv("LW_CPU_KERNELS", saved, 1);
    else
        unsetenv("LW_CPU_KERNELS");
    lw__vec_dot_fn fast = lw__quant_dot_x86(type, false, rows % 8 == 0, false);
    qd->act_from_float(x, act_ref, n);
    if (x86) lw__quant_act_x86(qd->vec_dot_type)(x, act_x86, n);

    double gb = (double)m.mat_bytes / 1e9, gflop = 2.0 * (double)n * (double)rows / 1e9;
    double t_ref = time_matvec(&m, qd->dot, act_ref, y, seconds);
    double t_x86 = x86 ? time_matvec(&m, x86, act_x86, y, seconds) : 0;
    double t_fast = fast && fast != x86 ? time_matvec(&m, fast, act_x86, y, seconds) : 0;
    printf("%-8s %8.2f | %8.2f %8.2f | ", tr->name, m.mat_bytes / 1048576.0, gb / t_ref, gflop / t_ref);
    if (x86)
        printf("%8.2f %8.2f | ", gb / t_x86, gflop / t_x86);
    else
        printf("%8s %8s | ", "-", "-");
    if (t_fast > 0)
        printf("%8.2f %8.2f %7.1fx %6.0f%%\n", gb / t_fast, gflop / t_fast, t_ref / t_fast,
               100 * gb / t_fast / anchor);
    else
        printf("%8s %8s %8s %6.0f%%\n", "-", "-", "-", 100 * gb / (x86 ? t_x86 : t_ref) / anchor);
    fflush(stdout);
    free(w), free(src), free(x), free(imat), free(y), free(act_ref), free(act_x86);
    return 0;
}

int lw__cmd_bench_kernels(int argc, char **argv) {
    int64_t n = 4096, rows = 4096;
    double seconds = 0.5;
    const char *types = "q4_0,q4_K,q8_0,iq4_xs,q5_K,q6_K,q4_1,q5_0,q2_K,q3_K,iq4_nl";
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--n") && i + 1 < argc)
            n = atoll(argv[++i]);
        else if (!strcmp(argv[i], "--rows") && i + 1 < argc)
            rows = atoll(argv[++i]);
        else if (!strcmp(argv[i], "--types") && i + 1 < argc)
            types = argv[++i];
        else if (!strcmp(argv[i], "--seconds") && i + 1 < argc)
            seconds = atof(argv[++i]);
        else {
            fprintf(stderr,
                    "usage: llamaweb bench-kernels [--n 4096] [--rows 4096] [--types q4_0,q8_0,..|all] "
                    "[--seconds 0.5]\n");
            return 2;
        }
    }
    if (n <= 0 || rows <= 0 || n > (1 << 20) || rows > (1 << 20)) {
        fprintf(stderr, "bench-kernels: --n and --rows must be in 1..1048576\n");
        return 2;
    }
    uint8_t *buf = malloc(WORKING_SET);
    if (!buf) return 1;
    memset(buf, 1, WORKING_SET);
    double anchor = read_bandwidth(buf, WORKING_SET, 1.0);
    free(buf);
    printf(
        "mat-vec %lld x %lld, 1 thread, working set >= %zu MiB; memory read bandwidth (anchor): %.2f GB/s\n",
        (long long)rows, (long long)n, WORKING_SET >> 20, anchor);
    printf("%-8s %8s | %17s | %17s | %33s\n", "", "", "scalar reference", "scalar, x86 order",
           "SIMD (x86 order)");
    printf("%-8s %8s | %8s %8s | %8s %8s | %8s %8s %8s %7s\n", "type", "MiB", "GB/s", "GFLOP/s", "GB/s",
           "GFLOP/s", "GB/s", "GFLOP/s", "vs ref", "vs bw");
    int rc = 0;
    if (!strcmp(types, "all")) {
        for (uint32_t t = 0; t < LW_TYPE_COUNT; t++)
            if (lw__quant_dot(t) && lw__quant_traits(t) && lw__quant_traits(t)->quantize)
                rc |= bench_type(t, n, rows, seconds, anchor);
        return rc;
    }
    char list[512];
    snprintf(list, sizeof list, "%s", types);
    for (char *tok = strtok(list, ","); tok; tok = strtok(NULL, ",")) {
        uint32_t t = LW_TYPE_COUNT;
        for (uint32_t k = 0; k < LW_TYPE_COUNT; k++)
            if (lw_type_get(k) && !strcmp(lw_type_get(k)->name, tok)) t = k;
        if (t == LW_TYPE_COUNT) {
            fprintf(stderr, "bench-kernels: unknown type '%s'\n", tok);
            return 2;
        }
        rc |= bench_type(t, n, rows, seconds, anchor);
    }
    return rc;
}
