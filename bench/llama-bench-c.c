/* llama-bench-c: llama.cpp's speed through its C API (libllama v0.4.0 as node-llama-cpp ships it, loaded with
 * dlopen; the struct layouts are tests/llama-oracle.h's), measured the way llama-bench does, for side-by-side
 * runs with `llamaweb bench` (bench/compare.py alternates the two on CPU) and with the WebGPU build's
 * `node web/cli.mjs bench` (bench/gpu-compare.sh, the `compare` step of scripts/bundle-webgpu-gpu.sh, against
 * llama.cpp's Vulkan build on a GPU machine).
 *
 *   llama-bench-c -m MODEL.gguf [-p 512] [-n 128] [-d 0] [-t 1,2] [-r 5] [--fa auto|on|off] [-ngl N]
 *                 [-ctk f16|q8_0|q4_0] [-ctv f16|q8_0|q4_0] [--lib LIBLLAMA.so] [--backend-dir DIR] [--json]
 *
 * pp: one batch of p random tokens into a fresh (cleared) context; tg: n single-token decodes after a
 * prompt of d tokens (d = 0: from an empty context, as llama-bench's tg; d = p: the positions that
 * `llamaweb bench` times, whose generation follows its prompt). Each thread count gets one untimed warm-up
 * (a pp run and one tg step, as llama-bench; on a GPU it also compiles the shaders, which would otherwise
 * cost the first repetition most of its speed), then r timed repetitions; the table shows the median and
 * the min..max spread, and with --json one JSON line per thread count follows it.
 *
 * Context parameters are llama-bench's defaults (llama_context_default_params with n_ctx = p + n + d,
 * n_batch 2048, n_ubatch 512, f16 KV cache unless -ctk / -ctv say otherwise (llama-bench's cache_type_k /
 * cache_type_v: ggml type ids 1, 8, 2), flash attention "auto"); n_threads and n_threads_batch are both
 * set and read back from the context, so a thread count that was not applied is an error. Unlike
 * llama-bench no ggml threadpool with polling is attached (that needs ggml-cpu's private entry points):
 * llama.cpp then uses its default per-context threadpool, as an application calling the C API does.
 *
 * Library: --lib names the libllama to load (default: the CPU build under node_modules, relative to the
 * repository root: run from there); its libggml*.so dependencies resolve from its own folder (RUNPATH
 * $ORIGIN). The backends (the per-CPU-feature ggml-cpu builds, ggml-vulkan) are loaded with
 * ggml_backend_load_all_from_path from --backend-dir (default: the library's folder). -ngl sets
 * n_gpu_layers (default: the library's, -1); with -ngl > 0 a GPU device must have been loaded, so a missing
 * Vulkan driver is an error rather than a silent CPU run. For the Vulkan build (node-llama-cpp's
 * @node-llama-cpp/linux-x64-vulkan, bins/linux-x64-vulkan):
 *   llama-bench-c --lib DIR/libllama.vulkan.v0.4.0.so -ngl 99 --fa on -t 16 -m M.gguf
 *
 * Built by bench/compare.py and scripts/bundle-webgpu-gpu.sh: cc -O2 -std=c11 -Itests bench/llama-bench-c.c
 * -ldl (no llama.cpp headers or libraries at build time). */
#define _POSIX_C_SOURCE 200809L
#include "llama-oracle.h"

#include <stdlib.h>
#include <time.h>

/* ---------------------------------------------------------------------------------------------------------
 * Loading libllama (any of node-llama-cpp's v0.4.0 builds: the CPU one, libllama.vulkan.v0.4.0.so, ...)
 * ------------------------------------------------------------------------------------------------------- */

/* Entry points beyond the oracle's ll table. */
static struct {
    void *(*get_memory)(const void *ctx);          /* llama_get_memory                        */
    void (*memory_clear)(void *mem, bool data);    /* llama_memory_clear                      */
    const void *(*model_get_vocab)(const void *m); /* llama_model_get_vocab                   */
    int32_t (*vocab_n_tokens)(const void *vocab);  /* llama_vocab_n_tokens                    */
    int32_t (*vocab_bos)(const void *vocab);       /* llama_vocab_bos                         */
    bool (*vocab_get_add_bos)(const void *vocab);  /* llama_vocab_get_add_bos                 */
    void (*synchronize)(void *ctx);                /* llama_synchronize                       */
    int32_t (*n_threads)(void *ctx);               /* llama_n_threads: read back what applies */
    int32_t (*n_threads_batch)(void *ctx);         /* llama_n_threads_batch                   */
    size_t (*dev_count)(void);                     /* ggml_backend_dev_count                  */
    void *(*dev_get)(size_t i);                    /* ggml_backend_dev_get                    */
    const char *(*dev_name)(void *dev);            /* ggml_backend_dev_name                   */
    const char *(*dev_description)(void *dev);     /* ggml_backend_dev_description            */
    int (*dev_type)(void *dev);                    /* ggml_backend_dev_type (0 = CPU)         */
} lx;

/* dlopens lib, fills the oracle's ll entries this program uses and lx (llama_oracle_open would load the CPU
 * build from its fixed folder only), starts the backend and loads the backends in backend_dir. Returns NULL,
 * or why not. */
static const char *bench_open(const char *lib, const char *backend_dir) {
    static char why[1400];
    void *h = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        snprintf(why, sizeof why, "cannot load %s: %s", lib, dlerror());
        return why;
    }
    struct {
        void **fn;
        const char *name;
    } syms[] = {
        {(void **)&ll.backend_init, "llama_backend_init"},
        {(void **)&ll.log_set, "llama_log_set"},
        {(void **)&ll.load_all_from_path, "ggml_backend_load_all_from_path"},
        {(void **)&ll.model_default_params, "llama_model_default_params"},
        {(void **)&ll.context_default_params, "llama_context_default_params"},
        {(void **)&ll.model_quantize_default_params,
         "llama_model_quantize_default_params"}, /* layout check */
        {(void **)&ll.model_load_from_file, "llama_model_load_from_file"},
        {(void **)&ll.model_free, "llama_model_free"},
        {(void **)&ll.init_from_model, "llama_init_from_model"},
        {(void **)&ll.free, "llama_free"},
        {(void **)&ll.decode, "llama_decode"},
        {(void **)&ll.model_size, "llama_model_size"},
        {(void **)&ll.model_desc, "llama_model_desc"},
        {(void **)&lx.get_memory, "llama_get_memory"},
        {(void **)&lx.memory_clear, "llama_memory_clear"},
        {(void **)&lx.model_get_vocab, "llama_model_get_vocab"},
        {(void **)&lx.vocab_n_tokens, "llama_vocab_n_tokens"},
        {(void **)&lx.vocab_bos, "llama_vocab_bos"},
        {(void **)&lx.vocab_get_add_bos, "llama_vocab_get_add_bos"},
        {(void **)&lx.synchronize, "llama_synchronize"},
        {(void **)&lx.n_threads, "llama_n_threads"},
        {(void **)&lx.n_threads_batch, "llama_n_threads_batch"},
        {(void **)&lx.dev_count, "ggml_backend_dev_count"},
        {(void **)&lx.dev_get, "ggml_backend_dev_get"},
        {(void **)&lx.dev_name, "ggml_backend_dev_name"},
        {(void **)&lx.dev_description, "ggml_backend_dev_description"},
        {(void **)&lx.dev_type, "ggml_backend_dev_type"},
    };
    for (size_t i = 0; i < sizeof syms / sizeof syms[0]; i++) {
        *syms[i].fn = dlsym(h, syms[i].name); /* the handle's search covers its libggml dependencies */
        if (!*syms[i].fn) {
            snprintf(why, sizeof why, "%s missing from %s", syms[i].name, lib);
            return why;
        }
    }
    ll.log_set(llama_oracle_log_cb, NULL);
    ll.backend_init();
    ll.load_all_from_path(backend_dir);
    if (!llama_oracle_layout_ok()) {
        snprintf(why, sizeof why, "%s: default params do not match the v0.4.0 layouts", lib);
        return why;
    }
    return NULL;
}

/* The devices the backends registered, "name (description), ..." into buf; returns how many are GPUs. */
static int list_devices(char *buf, size_t n) {
    int n_gpu = 0;
    size_t used = 0;
    buf[0] = 0;
    for (size_t i = 0; i < lx.dev_count(); i++) {
        void *d = lx.dev_get(i);
        const int type = lx.dev_type(d); /* ggml_backend_dev_type: CPU, GPU, IGPU, ACCEL (BLAS, AMX) */
        n_gpu += type == 1 || type == 2; /* the kinds llama.cpp puts layers on */
        int k =
            snprintf(buf + used, n - used, "%s%s (%s)", i ? ", " : "", lx.dev_name(d), lx.dev_description(d));
        if (k < 0 || (size_t)k >= n - used) break;
        used += (size_t)k;
    }
    return n_gpu;
}

/* ---------------------------------------------------------------------------------------------------------
 * Timing helpers
 * ------------------------------------------------------------------------------------------------------- */

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Median of a sorted array (mean of the middle two for an even count). */
static double median(const double *v, int n) {
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* Pseudo-random token ids (a fixed LCG, so every run and repetition sees the same kind of input). */
static uint32_t rng = 12345;
static int32_t rand_token(int32_t n_vocab) {
    rng = rng * 1664525u + 1013904223u;
    return (int32_t)((rng >> 8) % (uint32_t)n_vocab);
}

/* ---------------------------------------------------------------------------------------------------------
 * The two tests (as llama-bench's test_prompt / test_gen)
 * ------------------------------------------------------------------------------------------------------- */

typedef struct bench_state {
    void *ctx;         /* llama_context                                   */
    const void *vocab; /* the model's vocab                               */
    int32_t n_vocab;   /* tokens in it                                    */
    int32_t *toks;     /* scratch for a prompt batch (p or d tokens)      */
} bench_state;

/* Decodes n tokens as one batch (BOS first when the vocab adds one). Returns llama_decode's result. */
static int32_t decode_prompt(bench_state *s, int n) {
    for (int i = 0; i < n; i++) s->toks[i] = rand_token(s->n_vocab);
    if (n > 0 && lx.vocab_get_add_bos(s->vocab)) s->toks[0] = lx.vocab_bos(s->vocab);
    ll_batch b = {.n_tokens = n, .token = s->toks}; /* = llama_batch_get_one: positions follow the cache */
    int32_t r = ll.decode(s->ctx, b);
    lx.synchronize(s->ctx);
    return r;
}

/* n single-token decodes, each waited for (a generation loop needs each step's logits). */
static int32_t decode_gen(bench_state *s, int n) {
    int32_t tok = lx.vocab_get_add_bos(s->vocab) ? lx.vocab_bos(s->vocab) : rand_token(s->n_vocab);
    for (int i = 0; i < n; i++) {
        ll_batch b = {.n_tokens = 1, .token = &tok};
        int32_t r = ll.decode(s->ctx, b);
        if (r) return r;
        lx.synchronize(s->ctx);
        tok = rand_token(s->n_vocab);
    }
    return 0;
}

/* Writes a JSON string literal (quotes and backslashes escaped, control bytes as \u00XX). */
static void json_string(const char *str) {
    putchar('"');
    for (const unsigned char *c = (const unsigned char *)str; *c; c++) {
        if (*c == '"' || *c == '\\')
            printf("\\%c", *c);
        else if (*c < 0x20)
            printf("\\u%04x", *c);
        else
            putchar(*c);
    }
    putchar('"');
}

static void clear_memory(bench_state *s) {
    lx.memory_clear(lx.get_memory(s->ctx), false);
}

/* ---------------------------------------------------------------------------------------------------------
 * main
 * ------------------------------------------------------------------------------------------------------- */

static int usage(void) {
    fprintf(stderr,
            "usage: llama-bench-c -m MODEL.gguf [-p PROMPT=512] [-n GEN=128] [-d GEN_DEPTH=0] "
            "[-t THREADS=1,2] [-r REPS=5] [--fa auto|on|off] [-ngl N_GPU_LAYERS]\n"
            "                     [-ctk f16|q8_0|q4_0] [-ctv f16|q8_0|q4_0] [--lib LIBLLAMA.so] "
            "[--backend-dir DIR] [--json]\n"
            "  --lib          default %s/libllama.v0.4.0.so (run from the llamaweb repository root)\n"
            "  --backend-dir  ggml backends to load (default: the folder of --lib)\n",
            LLAMA_ORACLE_DIR);
    return 2;
}

/* The ggml type id of a KV cache type name (llama-bench's -ctk / -ctv), or -1. */
static int cache_type(const char *name) {
    return !strcmp(name, "f16") ? 1 : !strcmp(name, "q8_0") ? 8 : !strcmp(name, "q4_0") ? 2 : -1;
}

int main(int argc, char **argv) {
    const char *model_path = NULL, *threads = "1,2", *lib = LLAMA_ORACLE_DIR "/libllama.v0.4.0.so";
    const char *backend_dir = NULL;
    int n_p = 512, n_g = 128, n_d = 0, reps = 5, json = 0, fa = -1; /* -1 = LLAMA_FLASH_ATTN_TYPE_AUTO */
    int ngl = -2;                                                   /* -2: the library's default     */
    int type_k = 1, type_v = 1; /* the KV cache's ggml types (GGML_TYPE_F16) */
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--json")) {
            json = 1;
            continue;
        }
        if (!v) return usage();
        i++;
        if (!strcmp(a, "-m"))
            model_path = v;
        else if (!strcmp(a, "-p"))
            n_p = atoi(v);
        else if (!strcmp(a, "-n"))
            n_g = atoi(v);
        else if (!strcmp(a, "-d"))
            n_d = atoi(v);
        else if (!strcmp(a, "-t"))
            threads = v;
        else if (!strcmp(a, "-r"))
            reps = atoi(v);
        else if (!strcmp(a, "-ngl") || !strcmp(a, "--n-gpu-layers"))
            ngl = atoi(v);
        else if (!strcmp(a, "--lib"))
            lib = v;
        else if (!strcmp(a, "--backend-dir"))
            backend_dir = v;
        else if ((!strcmp(a, "-ctk") || !strcmp(a, "-ctv")) && cache_type(v) >= 0)
            *(a[3] == 'k' ? &type_k : &type_v) = cache_type(v);
        else if (!strcmp(a, "--fa") && !strcmp(v, "auto"))
            fa = -1;
        else if (!strcmp(a, "--fa") && !strcmp(v, "off"))
            fa = 0;
        else if (!strcmp(a, "--fa") && !strcmp(v, "on"))
            fa = 1;
        else
            return usage();
    }
    if (!model_path || n_p < 0 || n_g < 0 || n_d < 0 || n_p > (1 << 16) || n_g > (1 << 16) ||
        n_d > (1 << 16) || n_p + n_g == 0 || reps < 1 || reps > 100 || ngl < -2 || strlen(lib) >= 1024)
        return usage();
    char lib_dir[1024]; /* --backend-dir's default: the library's folder */
    if (!backend_dir) {
        const char *slash = strrchr(lib, '/');
        snprintf(lib_dir, sizeof lib_dir, "%.*s", slash ? (int)(slash - lib) : 1, slash ? lib : ".");
        backend_dir = lib_dir;
    }

    const char *why = bench_open(lib, backend_dir);
    if (why) {
        fprintf(stderr, "llama-bench-c: %s\n", why);
        return 1;
    }
    char devices[1024];
    const int n_gpu = list_devices(devices, sizeof devices);
    if (ngl > 0 && n_gpu == 0) {
        /* ggml-vulkan passes over CPU-type Vulkan devices (lavapipe) unless they are listed explicitly */
        fprintf(
            stderr,
            "llama-bench-c: -ngl %d, but no GPU device was loaded from %s (devices: %s; a CPU Vulkan driver "
            "such as lavapipe needs GGML_VK_VISIBLE_DEVICES=0)%s%s\n",
            ngl, backend_dir, devices, llama_oracle_log[0] ? "; llama.cpp said: " : "", llama_oracle_log);
        return 1;
    }
    ll_model_params mp = ll.model_default_params();
    if (ngl > -2) mp.n_gpu_layers = ngl;
    void *model = ll.model_load_from_file(model_path, mp);
    if (!model) {
        fprintf(stderr, "llama-bench-c: cannot load %s: %s\n", model_path, llama_oracle_log);
        return 1;
    }
    char desc[256];
    ll.model_desc(model, desc, sizeof desc);
    bench_state s = {.vocab = lx.model_get_vocab(model)};
    s.n_vocab = lx.vocab_n_tokens(s.vocab);
    int n_buf = n_p > n_d ? n_p : n_d;
    s.toks = malloc(sizeof(int32_t) * (size_t)(n_buf > 0 ? n_buf : 1));
    double *pp = malloc(sizeof(double) * (size_t)reps), *tg = malloc(sizeof(double) * (size_t)reps);
    int rc = 1;
    if (!s.toks || !pp || !tg) goto done;

    const char *lib_name = strrchr(lib, '/') ? strrchr(lib, '/') + 1 : lib;
    const char *fa_name = fa < 0 ? "auto" : fa ? "on" : "off";
    printf("model: %s (llama.cpp %s: %s, %.1f MiB), kv f16, flash-attn %s, gpu layers %d\ndevices: %s\n",
           model_path, lib_name, desc, (double)ll.model_size(model) / 1048576.0, fa_name, mp.n_gpu_layers,
           devices);
    printf("| threads | pp%-5d t/s (min..max)    | tg%-5d t/s (min..max) @ depth %-5d |\n"
           "|---------|-----------------------------|---------------------------------------|\n",
           n_p, n_g, n_d);
    fflush(stdout);
    for (const char *t = threads; *t;) {
        int nt = atoi(t);
        while (*t && *t != ',') t++;
        if (*t == ',') t++;
        if (nt <= 0) continue;
        ll_context_params cp = ll.context_default_params();
        cp.n_ctx = (uint32_t)(n_p + n_g + n_d);
        cp.n_threads = cp.n_threads_batch = nt;
        cp.flash_attn_type = fa;
        cp.type_k = type_k;
        cp.type_v = type_v;
        s.ctx = ll.init_from_model(model, cp);
        if (!s.ctx) {
            fprintf(stderr, "llama-bench-c: cannot create a context: %s\n", llama_oracle_log);
            goto done;
        }
        if (lx.n_threads(s.ctx) != nt || lx.n_threads_batch(s.ctx) != nt) {
            fprintf(stderr, "llama-bench-c: asked for %d threads, the context uses %d / %d (batch)\n", nt,
                    lx.n_threads(s.ctx), lx.n_threads_batch(s.ctx));
            ll.free(s.ctx);
            goto done;
        }
        /* warm-up, untimed: a whole pp run and one generation step (llama-bench's) */
        if ((n_p > 0 && decode_prompt(&s, n_p)) || (n_g > 0 && decode_gen(&s, 1))) {
            fprintf(stderr, "llama-bench-c: warm-up decode failed: %s\n", llama_oracle_log);
            ll.free(s.ctx);
            goto done;
        }
        int ok = 1;
        for (int r = 0; r < reps && ok; r++) {
            pp[r] = tg[r] = 0;
            if (n_p > 0) {
                clear_memory(&s);
                double t0 = now_s();
                ok = decode_prompt(&s, n_p) == 0;
                double t1 = now_s();
                pp[r] = n_p / (t1 - t0 > 0 ? t1 - t0 : 1e-9);
            }
            if (n_g > 0 && ok) {
                clear_memory(&s);
                ok = n_d == 0 || decode_prompt(&s, n_d) == 0; /* the context tg runs on, untimed */
                double t0 = now_s();
                ok = ok && decode_gen(&s, n_g) == 0;
                double t1 = now_s();
                tg[r] = n_g / (t1 - t0 > 0 ? t1 - t0 : 1e-9);
            }
        }
        int used = lx.n_threads(s.ctx);
        ll.free(s.ctx);
        if (!ok) {
            fprintf(stderr, "llama-bench-c: decode failed: %s\n", llama_oracle_log);
            goto done;
        }
        qsort(pp, (size_t)reps, sizeof(double), cmp_double);
        qsort(tg, (size_t)reps, sizeof(double), cmp_double);
        printf("| %7d | %9.2f (%7.2f..%7.2f) | %9.2f (%7.2f..%7.2f)             |\n", used, median(pp, reps),
               pp[0], pp[reps - 1], median(tg, reps), tg[0], tg[reps - 1]);
        if (json) {
            printf("{\"engine\":\"llama.cpp\",\"model\":");
            json_string(model_path);
            printf(",\"lib\":");
            json_string(lib_name);
            printf(",\"threads\":%d,\"n_prompt\":%d,\"n_gen\":%d,\"gen_depth\":%d,\"reps\":%d,\"flash_attn\":"
                   "%d,\"n_gpu_layers\":%d,\"type_k\":%d,\"type_v\":%d,\"pp_median\":%.3f,\"pp_min\":%.3f,"
                   "\"pp_max\":%.3f,\"tg_median\":%.3f,\"tg_min\":%.3f,\"tg_max\":%.3f}\n",
                   used, n_p, n_g, n_d, reps, fa, mp.n_gpu_layers, type_k, type_v, median(pp, reps), pp[0],
                   pp[reps - 1], median(tg, reps), tg[0], tg[reps - 1]);
        }
        fflush(stdout);
    }
    rc = 0;
done:
    free(s.toks);
    free(pp);
    free(tg);
    ll.model_free(model);
    return rc;
}
