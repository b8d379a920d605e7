/* libFuzzer target: a whole model from hostile GGUF bytes. The bytes are loaded as a model (hyper-parameters
 * and tensor shapes that contradict each other or the architecture must be refused with a message), and a
 * model that loads gets a small CPU context (32 cells), decodes a few tokens and tokenizes a text with its
 * vocabulary; the same bytes loaded header-only are planned for WebGPU over a fake HAL
 * (tests/gpu-fault-hal.h) and decode one step there. Memory comes from a budget allocator: a request far
 * larger than the input can justify is a finding (a loader that plans something huge before checking it), not
 * an out-of-memory. LW_FUZZ_MODE=cpu or gpu fuzzes one half (scripts/fuzz.sh passes the environment on); the
 * replay runs both on every input. Seeds: tests/fuzz/seeds/model (tiny synthetic models of each architecture,
 * written by `scripts/fuzz-seeds.sh model`); dictionary: tests/fuzz/gguf.dict. Run with `scripts/fuzz.sh
 * fuzz-model`. */
#include "llamaweb.h"
#include "webgpu/gpu-model.h"

#include "../gpu-fault-hal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The allocator: counts live bytes and refuses past a budget; a single request over `huge` traps. */
typedef struct budget {
    size_t live;  /* bytes handed out and not freed  */
    size_t limit; /* refuse beyond this              */
    size_t huge;  /* a request above this is a bug   */
} budget;

/* Each block carries its size in front, so free and realloc can keep the count. */
#define HDR 16

static void *b_malloc(void *u, size_t n) {
    budget *b = u;
    if (n > b->huge) {
        fprintf(stderr, "fuzz-model: a %zu-byte allocation for a small file\n", n);
        abort();
    }
    if (n > b->limit - b->live) return NULL;
    unsigned char *p = malloc(n + HDR);
    if (!p) return NULL;
    memcpy(p, &n, sizeof n);
    b->live += n;
    return p + HDR;
}
static void b_free(void *u, void *q) {
    budget *b = u;
    if (!q) return;
    unsigned char *p = (unsigned char *)q - HDR;
    size_t n;
    memcpy(&n, p, sizeof n);
    b->live -= n;
    free(p);
}
static void *b_realloc(void *u, void *q, size_t n) {
    budget *b = u;
    if (!q) return b_malloc(u, n);
    unsigned char *p = (unsigned char *)q - HDR;
    size_t old;
    memcpy(&old, p, sizeof old);
    if (n > b->huge) {
        fprintf(stderr, "fuzz-model: a %zu-byte reallocation for a small file\n", n);
        abort();
    }
    if (n > old && n - old > b->limit - b->live) return NULL;
    unsigned char *r = realloc(p, n + HDR);
    if (!r) return NULL;
    memcpy(r, &n, sizeof n);
    b->live = b->live - old + n;
    return r + HDR;
}

static void cpu_part(lw_model *m) {
    lw_context_params cp = lw_context_default_params();
    cp.n_ctx = 32;
    cp.n_batch = 8;
    cp.n_threads = 1;
    lw_context *c = NULL;
    if (lw_context_create(m, &cp, &c) == LW_OK) {
        const int32_t nv = lw_model_n_vocab(m);
        int32_t ids[5] = {0, 1 % nv, 2 % nv, (nv - 1), 3 % nv};
        if (lw_decode(c, ids, 5, 0) != LW_OK || !lw_get_logits(c, -1)) abort(); /* a made context decodes */
        if (lw_decode(c, ids + 1, 1, 0) != LW_OK) abort();
        if (lw_context_n_past(c) != 6) abort();
        int32_t bad = nv;
        if (lw_decode(c, &bad, 1, 0) == LW_OK) abort(); /* an id out of range is refused */
    } else if (c && !lw_context_error(c)[0]) {
        abort();
    }
    lw_context_free(c);
    const lw_vocab *v = lw_model_vocab(m);
    if (v) {
        static const char text[] = "Hello world <s> \xe6\x97\xa5\xff!";
        int32_t toks[4 * sizeof text + 2];
        size_t n = 0;
        if (lw_tokenize(v, text, sizeof text - 1, 1, 1, toks, sizeof toks / sizeof toks[0], &n) != LW_OK)
            abort();
        char out[4096];
        size_t k;
        (void)lw_detokenize(v, toks, n, 0, 1, out, sizeof out, &k);
    }
}

static void gpu_part(lw_source *src, const lw_model_params *base) {
    static fault_hal f; /* large: not on the stack */
    lw_model_params mp = *base;
    mp.no_weights = 1;
    mp.no_vocab = 1;
    lw_model *m = NULL;
    if (lw_model_load_source(src, &mp, &m) == LW_OK) {
        fault_hal_init(&f);
        lw__gpu_model_params p = lw__gpu_model_default_params();
        p.n_ctx = 32;
        p.n_batch = 8;
        p.host_source = 1;
        lw__gpu_model *g = NULL;
        lw_gpu gpu = {&fault_hal_ops, &f};
        if (lw__gpu_model_create(gpu, m, &p, &g) == LW_OK) {
            int32_t t[2] = {1 % lw_model_n_vocab(m), 0};
            if (lw__gpu_model_decode(g, t, 2, LW_GPU_OUT_ARGMAX) != LW_OK) abort();
        } else if (g && !lw__gpu_model_error(g)[0]) {
            abort();
        }
        lw__gpu_model_free(g);
        if (f.live_buf || f.bad) {
            fprintf(stderr, "fuzz-model: GPU plan left %u buffers, %llu rule violations\n", f.live_buf,
                    (unsigned long long)f.bad);
            abort();
        }
    } else if (m && !lw_model_error(m)[0]) {
        abort();
    }
    lw_model_free(m);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    /* Everything a model of `size` bytes can need is a small multiple of it (weights, KV cache of 32 cells,
     * activations of 8 tokens) plus fixed tables; 64 MiB + 64x covers the seeds many times over. */
    budget b = {0, (size_t)256 << 20, ((size_t)64 << 20) + 64 * size};
    lw_allocator a = {b_malloc, b_realloc, b_free, &b};
    lw_source *src = NULL;
    if (lw_source_from_memory(data, size, NULL, &src) != LW_OK) return 0;
    lw_model_params mp = lw_model_default_params();
    mp.alloc = &a;
    lw_model *m = NULL;
    const char *env =
        getenv("LW_FUZZ_MODE"); /* "cpu" or "gpu": one half only (the GPU plan is ~20x slower) */
    const char mode = env && *env ? env[0] : 'a';
    lw_status st = mode == 'g' ? LW_ERR_INVALID_ARG : lw_model_load_source(src, &mp, &m);
    if (st == LW_OK)
        cpu_part(m);
    else if (mode != 'g' && m && !lw_model_error(m)[0])
        abort(); /* every refusal says why */
    lw_model_free(m);
    if (mode != 'c') gpu_part(src, &mp);
    lw_source_close(src);
    if (b.live) {
        fprintf(stderr, "fuzz-model: %zu bytes not freed\n", b.live);
        abort();
    }
    return 0;
}
