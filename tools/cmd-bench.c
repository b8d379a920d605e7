/* `llamaweb bench -m MODEL.gguf [-p 512] [-n 128] [-t 1,2] [-r 3]`: prompt processing (one batch of p
 * tokens) and generation (n single-token steps after it) speed of the CPU engine, in tokens per second,
 * median of r runs, per thread count. Token ids are a fixed pseudo-random sequence, as llama-bench's. */
#include "cli.h"
#include "cpu/engine-ops.h"
#include "model/engine.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static int usage(void) {
    fprintf(stderr,
            "usage: llamaweb bench -m MODEL.gguf [-p PROMPT_TOKENS=512] [-n GEN_TOKENS=128] [-t THREADS=1,2] "
            "[-r REPS=3] [--kv f16|f32|q8_0|q4_0] [--rows-embd N] [--rows-per-layer N] [--rows-experts E] "
            "[--rows-dir DIR]\n");
    return 2;
}

int lw__cmd_bench(int argc, char **argv) {
    const char *model_path = NULL, *threads = "1,2";
    int n_p = 512, n_g = 128, reps = 3;
    uint32_t kv = LW_TYPE_F16;
    lw__cli_rows rows = {0, 0, 0, NULL};
    for (int i = 1; i < argc; i += 2) {
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!v) return usage();
        if (!strcmp(argv[i], "-m")) model_path = v;
        else if (!strcmp(argv[i], "-p")) n_p = atoi(v);
        else if (!strcmp(argv[i], "-n")) n_g = atoi(v);
        else if (!strcmp(argv[i], "-t")) threads = v;
        else if (!strcmp(argv[i], "-r")) reps = atoi(v);
        else if (!strcmp(argv[i], "--kv") && lw__cli_kv_type(v) != UINT32_MAX) kv = lw__cli_kv_type(v);
        else if (lw__cli_rows_option(argv[i], v, &rows) != 2) return usage();
    }
    if (!model_path || n_p < 0 || n_g < 0 || n_p > (1 << 20) || n_g > (1 << 20) || n_p + n_g == 0 || reps < 1 || reps > 100)
        return usage();

    lw_model *m = NULL;
    /* token ids only */
    if (lw__cli_load_model_rows("bench", model_path, &rows, 1, &m)) return 1;
    const int n_vocab = lw_model_n_vocab(m);
    int32_t *toks = malloc(sizeof(int32_t) * (size_t)(n_p + n_g + 1));
    double *pp = malloc(sizeof(double) * (size_t)reps), *tg = malloc(sizeof(double) * (size_t)reps);
    int rc = 1;
    if (!toks || !pp || !tg) goto done;
    uint32_t x = 12345;
    for (int i = 0; i < n_p + n_g; i++) {
        x = x * 1664525u + 1013904223u;
        toks[i] = (int32_t)((x >> 8) % (uint32_t)n_vocab);
    }
    printf("model: %s (%s, %.1f MiB), kv %s, CPU kernels %s\n", model_path, lw_model_arch(m),
           (double)lw_model_weight_bytes(m) / 1048576.0, kv == LW_TYPE_F16 ? "f16" : "f32", lw__cpu_kernels_best()->name);
    printf("| threads | pp%-5d t/s | tg%-5d t/s |\n|---------|-------------|-------------|\n", n_p, n_g);
    for (const char *t = threads; *t;) {
        int nt = atoi(t);
        while (*t && *t != ',') t++;
        if (*t == ',') t++;
        if (nt <= 0) continue;
        lw_context_params cp = lw_context_default_params();
        cp.n_ctx = (uint32_t)(n_p + n_g + 1);
        cp.n_batch = n_p > 0 ? (uint32_t)n_p : 1;
        cp.n_threads = nt;
        cp.type_k = cp.type_v = kv;
        lw_context *c = NULL;
        if (lw_context_create(m, &cp, &c) != LW_OK) {
            fprintf(stderr, "llamaweb bench: %s\n", lw_context_error(c));
            lw_context_free(c);
            goto done;
        }
        /* one warm-up step so first-touch page faults are not timed */
        lw_decode(c, toks, 1, 0);
        for (int r = 0; r < reps; r++) {
            lw_context_set_n_past(c, 0);
            double t0 = now_s();
            if (n_p > 0 && lw_decode(c, toks, n_p, 0) != LW_OK) break;
            double t1 = now_s();
            for (int i = 0; i < n_g; i++)
                if (lw_decode(c, &toks[n_p + i], 1, 0) != LW_OK) break;
            double t2 = now_s();
            pp[r] = n_p / (t1 - t0 > 0 ? t1 - t0 : 1e-9);
            tg[r] = n_g / (t2 - t1 > 0 ? t2 - t1 : 1e-9);
        }
        qsort(pp, (size_t)reps, sizeof(double), cmp_double);
        qsort(tg, (size_t)reps, sizeof(double), cmp_double);
        printf("| %7d | %11.1f | %11.1f |\n", lw_context_n_threads(c), pp[reps / 2], tg[reps / 2]);
        fflush(stdout);
        lw__cli_rows_report("bench", c);
        lw_context_free(c);
    }
    rc = 0;
done:
    free(toks);
    free(pp);
    free(tg);
    lw_model_free(m);
    return rc;
}
