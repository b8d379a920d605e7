/* The CPU engine for the browser package (web/lw-model.mjs CpuEngine; device 'cpu', and 'auto' without a
 * usable GPU): a GGUF file held by a host byte source is loaded into the wasm heap with each tensor read
 * straight into its final place in the model's one weight allocation, then decoded by the CPU engine (simd128
 * kernels; the context's thread pool in a pthreads build, one thread otherwise) and sampled by the CPU
 * sampler.
 *
 * Reads are synchronous in C but a Blob or a fetch can only be read asynchronously, so loading is split:
 * lw_wasm_cpum_open parses the header from a prefetched head of the file (a read past it fails the open and
 * JS retries with a longer head, as for the GPU model), lets the model loader bind every tensor and "read"
 * it, and the host records each tensor read (file offset, heap address, bytes) instead of serving it. JS then
 * streams those ranges from the source in chunks straight into the heap (one copy; no JS-side copy of the
 * file) and calls lw_wasm_cpum_loaded. Nothing reads weight bytes before the first decode (the loader only
 * binds pointers, the context plans its arena), which is what makes the deferral sound; the browser tests
 * hold it to the native CLI's greedy text. Compiled only by the wasm build. */
#include "core/core.h"

#include <emscripten/emscripten.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Shared with web/lw-wasm-model.c (the GPU model's set_sampling and the CPU reference's greedy pick). */
bool lw_wasm_sampling_params(float temp, int top_k, float top_p, float min_p, double seed,
                             lw_sampler_params *out, char *err);
int32_t lw_wasm_argmax(const float *logits, int32_t n);

/* Synchronous read of host source id (Module.lwCpu.sources[id].readInto): bytes [off, off + n) into dst now,
 * or, when deferrable (tensor data), possibly recorded to be written at dst later. Returns 0 on success. */
// clang-format off
EM_JS(int, lw_js_cpu_read, (uint32_t id, double off, void *dst, double n, int deferrable), {
    try {
        const s = Module['lwCpu'].sources[id];
        return s && s.readInto(off, dst, n, deferrable !== 0) ? 0 : 1;
    } catch (e) {
        return 1;
    }
});
// clang-format on

/* ---------------------------------------------------------------------------------------------------------
 * State
 * ------------------------------------------------------------------------------------------------------- */

/* A model on the CPU with its context and sampler. */
typedef struct lw_wasm_cpum {
    uint32_t host;             /* host source of the GGUF file                                       */
    lw_source *src;            /* over it (the model reads through it while loading)                 */
    uint64_t data_off;         /* where the file's tensor data starts: reads from here may be deferred */
    lw_model *m;               /* the model, weights bound into its allocation                       */
    lw_context *c;             /* KV cache, activations, threads                                     */
    lw_sampler *s;             /* sampler of decodes with out 3 (NULL until set_sampling)            */
    int loaded;                /* 1 once the host wrote every deferred tensor range (lw_wasm_cpum_loaded) */
    int32_t token;             /* the last decode's chosen token (argmax or drawn)                   */
    int32_t threads_wanted;    /* threads asked for (the context may run fewer: see lw_wasm_cpum_info_json) */
    uint32_t kv_type;          /* the KV cache's LW_TYPE (lw_wasm_cpum_info_json's kvType)              */
    lw_status status;          /* status of the last failed call                                     */
    char err[LW_ERRMSG_SIZE];  /* why opening failed ("" when none): the model is unusable            */
    char derr[LW_ERRMSG_SIZE]; /* why the last decode failed (the model stays usable)                */
    char serr[LW_ERRMSG_SIZE]; /* why the last set_sampling failed (the model stays usable)          */
} lw_wasm_cpum;

static lw_status host_read(void *user, uint64_t off, void *dst, size_t n) {
    const lw_wasm_cpum *w = user;
    int deferrable = w->data_off > 0 && off >= w->data_off;
    return lw_js_cpu_read(w->host, (double)off, dst, (double)n, deferrable) ? LW_ERR_IO : LW_OK;
}

/* Records a failure of `what` into buf (w->err or w->derr); returns st. */
static int fail_in(lw_wasm_cpum *w, char *buf, lw_status st, const char *what, const char *why) {
    w->status = st;
    lw__errorf(buf, st, "%s: %s", what, why && why[0] ? why : lw_status_str(st));
    return (int)st;
}
static int fail(lw_wasm_cpum *w, lw_status st, const char *what, const char *why) {
    return fail_in(w, w->err, st, what, why);
}

EMSCRIPTEN_KEEPALIVE void lw_wasm_cpum_free(lw_wasm_cpum *w) {
    if (!w) return;
    lw_sampler_free(w->s);
    lw_context_free(w->c);
    lw_model_free(w->m);
    lw_source_close(w->src);
    free(w);
}

EMSCRIPTEN_KEEPALIVE const char *lw_wasm_cpum_error(const lw_wasm_cpum *w) {
    return w ? w->err : "out of memory";
}
/* The lw_status of the last failure (0: none), for the JS error codes. */
EMSCRIPTEN_KEEPALIVE int lw_wasm_cpum_status(const lw_wasm_cpum *w) {
    return w ? (int)w->status : (int)LW_ERR_NOMEM;
}

/* ---------------------------------------------------------------------------------------------------------
 * Opening
 * ------------------------------------------------------------------------------------------------------- */

/* Opens the model of host source `host` (size bytes) for the CPU: header, tokenizer, weight allocation (its
 * tensor ranges recorded by the host, to be written before lw_wasm_cpum_loaded), and a context of n_ctx cells
 * (0: the model's training context, at most 4096), n_batch tokens per step (0: default), n_threads threads
 * (< 1: 1; when the pool cannot start them, e.g. no pthreads in this build, one thread), kv_type: the KV
 * cache's LW_TYPE (F16, F32, Q8_0 or Q4_0; < 0: F16, the default). Returns NULL only when memory runs out; otherwise check lw_wasm_cpum_error() (empty:
 * fine) and free it either way. */
EMSCRIPTEN_KEEPALIVE lw_wasm_cpum *lw_wasm_cpum_open(uint32_t host, double size, int n_ctx, int n_batch,
                                                     int n_threads, int kv_type) {
    lw_wasm_cpum *w = calloc(1, sizeof *w);
    if (!w) return NULL;
    w->host = host;
    w->token = -1;
    w->threads_wanted = n_threads < 1 ? 1 : n_threads;
    if (!(size >= 0 && size < 18446744073709551616.0)) {
        fail(w, LW_ERR_INVALID_ARG, "source", "bad size");
        return w;
    }
    lw_status st = lw_source_from_callbacks((uint64_t)size, host_read, NULL, w, NULL, &w->src);
    if (st != LW_OK) {
        fail(w, st, "source", NULL);
        return w;
    }
    /* the header alone first, to learn where tensor data starts (every read before it is served now) */
    lw_gguf *g = NULL;
    st = lw_gguf_open(w->src, NULL, &g);
    if (st == LW_OK) w->data_off = lw_gguf_data_offset(g);
    if (st != LW_OK) fail(w, st, "model", g ? lw_gguf_error(g) : NULL);
    lw_gguf_close(g);
    if (st != LW_OK) return w;
    if (w->data_off ==
        0) { /* cannot happen in a valid file (the header comes first); never defer the header */
        fail(w, LW_ERR_TRUNCATED, "model", "no tensor data section");
        return w;
    }
    lw_model_params mp = lw_model_default_params();
    if ((st = lw_model_load_source(w->src, &mp, &w->m)) != LW_OK) {
        fail(w, st, "model", lw_model_error(w->m));
        return w;
    }
    lw_context_params cp = lw_context_default_params();
    cp.n_ctx = n_ctx > 0 ? (uint32_t)n_ctx : 0;
    if (n_batch > 0) cp.n_batch = (uint32_t)n_batch;
    cp.n_threads = w->threads_wanted;
    if (kv_type >= 0) cp.type_k = cp.type_v = (uint32_t)kv_type; /* lw_context_create refuses the others */
    w->kv_type = cp.type_k;
    st = lw_context_create(w->m, &cp, &w->c);
    if (st != LW_OK && cp.n_threads > 1 && st != LW_ERR_NOMEM) {
        /* threads could not start (a single-thread build, or the browser refused more workers): one thread */
        lw_context_free(w->c);
        w->c = NULL;
        cp.n_threads = 1;
        st = lw_context_create(w->m, &cp, &w->c);
    }
    if (st != LW_OK) fail(w, st, "context", w->c ? lw_context_error(w->c) : NULL);
    return w;
}

/* The host has written every deferred tensor range: decoding may start. */
EMSCRIPTEN_KEEPALIVE void lw_wasm_cpum_loaded(lw_wasm_cpum *w) {
    if (!w->err[0]) w->loaded = 1;
}

/* The model (web/lw-wasm-session.c and web/lw-wasm-chat.c read its template and tokenize with it). */
EMSCRIPTEN_KEEPALIVE lw_model *lw_wasm_cpum_model(const lw_wasm_cpum *w) {
    return w ? w->m : NULL;
}

/* ---------------------------------------------------------------------------------------------------------
 * Decoding and sampling
 * ------------------------------------------------------------------------------------------------------- */

/* The sampler settings of the package's draws, GPU and CPU alike (web/lw-model.mjs setSampling): the CPU
 * sampler's defaults with penalties off (the GPU draws have none) and these. false, with the message in err
 * (LW_ERRMSG_SIZE bytes), for a seed outside uint64. */
bool lw_wasm_sampling_params(float temp, int top_k, float top_p, float min_p, double seed,
                             lw_sampler_params *out, char *err) {
    if (!(seed >= 0 && seed < 18446744073709551616.0)) {
        lw__errorf(err, LW_ERR_INVALID_ARG, "sampling: bad seed");
        return false;
    }
    *out = lw_sampler_default_params();
    out->penalty_last_n = 0;
    out->temp = temp;
    out->top_k = top_k;
    out->top_p = top_p;
    out->min_p = min_p;
    out->seed = (uint64_t)seed;
    return true;
}

/* The first index of the largest of n logits (the GPU argmax's rule for ties). */
int32_t lw_wasm_argmax(const float *logits, int32_t n) {
    int32_t best = 0;
    for (int32_t i = 1; i < n; i++)
        if (logits[i] > logits[best]) best = i;
    return best;
}

/* Sampling parameters of decodes with out 3 (penalties off, as on the GPU); reseeds. Returns the top-k in
 * effect (0: off), or -1 with the message in lw_wasm_cpum_sampling_error() (the previous sampler stays). */
EMSCRIPTEN_KEEPALIVE int lw_wasm_cpum_set_sampling(lw_wasm_cpum *w, float temp, int top_k, float top_p,
                                                   float min_p, double seed) {
    w->serr[0] = 0;
    if (!w->m) {
        lw__errorf(w->serr, LW_ERR_INVALID_ARG, "sampling: no model");
        return -1;
    }
    lw_sampler_params sp;
    if (!lw_wasm_sampling_params(temp, top_k, top_p, min_p, seed, &sp, w->serr)) return -1;
    lw_sampler *s = NULL;
    lw_status st = lw_sampler_create(lw_model_n_vocab(w->m), &sp, NULL, &s);
    if (st != LW_OK) {
        lw__errorf(w->serr, st, "sampling: %s", lw_status_str(st));
        return -1;
    }
    lw_sampler_free(w->s);
    w->s = s;
    return top_k > 0 ? top_k : 0;
}

EMSCRIPTEN_KEEPALIVE const char *lw_wasm_cpum_sampling_error(const lw_wasm_cpum *w) {
    return w->serr;
}

/* Decodes n tokens at ids (wasm memory) after the cells in use. out: 0 nothing more, 1 the greedy next id
 * (first maximum, as the GPU argmax), 2 the same and the logits (lw_wasm_cpum_logits), 3 a token drawn by the
 * sampler of set_sampling (recorded for it). The id is lw_wasm_cpum_token(). Returns an lw_status (message:
 * lw_wasm_cpum_error; a prompt that does not fit is LW_ERR_TOO_LARGE and leaves the cells as they were). */
EMSCRIPTEN_KEEPALIVE int lw_wasm_cpum_decode(lw_wasm_cpum *w, const int32_t *ids, int n, int out) {
    w->derr[0] = 0;
    if (w->err[0] || !w->c) return fail_in(w, w->derr, LW_ERR_INVALID_ARG, "decode", w->err);
    if (!w->loaded)
        return fail_in(w, w->derr, LW_ERR_INVALID_ARG, "decode", "the weights are not loaded yet");
    if (out == 3 && !w->s)
        return fail_in(w, w->derr, LW_ERR_INVALID_ARG, "decode", "no sampling parameters (set_sampling)");
    if (out < 0 || out > 3 || n <= 0)
        return fail_in(w, w->derr, LW_ERR_INVALID_ARG, "decode", "bad arguments");
    lw_status st = lw_decode(w->c, ids, n, 0);
    /* on failure the cache is as it was (lw_decode checks before it writes): the model stays usable */
    if (st != LW_OK) return fail_in(w, w->derr, st, "decode", lw_context_error(w->c));
    w->token = -1;
    if (out == 3) {
        w->token = lw_sample(w->c, w->s, -1);
    } else if (out != 0) {
        w->token = lw_wasm_argmax(lw_get_logits(w->c, -1), lw_model_n_vocab(w->m));
    }
    return LW_OK;
}

/* Message of the last failed decode ("" when it succeeded); its status is lw_wasm_cpum_status(). */
EMSCRIPTEN_KEEPALIVE const char *lw_wasm_cpum_decode_error(const lw_wasm_cpum *w) {
    return w->derr;
}

EMSCRIPTEN_KEEPALIVE int lw_wasm_cpum_token(const lw_wasm_cpum *w) {
    return w->token;
}
EMSCRIPTEN_KEEPALIVE const float *lw_wasm_cpum_logits(const lw_wasm_cpum *w) {
    return lw_get_logits(w->c, -1);
}
EMSCRIPTEN_KEEPALIVE int lw_wasm_cpum_n_past(const lw_wasm_cpum *w) {
    return w->c ? (int)lw_context_n_past(w->c) : 0;
}
/* Forgets cells from n_past on; returns an lw_status. */
EMSCRIPTEN_KEEPALIVE int lw_wasm_cpum_set_n_past(lw_wasm_cpum *w, int n_past) {
    if (!w->c || n_past < 0) return LW_ERR_INVALID_ARG;
    return (int)lw_context_set_n_past(w->c, (uint32_t)n_past);
}

/* Facts about the model and context as JSON (the keys of the GPU model's info that apply, and threads). */
EMSCRIPTEN_KEEPALIVE int lw_wasm_cpum_info_json(const lw_wasm_cpum *w, char *dst, int cap) {
    if (!w->m || !w->c || !dst || cap <= 0) return -1;
    int n =
        snprintf(dst, (size_t)cap,
                 "{\"arch\":\"%s\",\"n_vocab\":%d,\"n_layer\":%d,\"n_embd\":%d,\"n_ctx\":%u,\"n_batch\":%u,"
                 "\"threads\":%d,\"threadsWanted\":%d,\"weightBytes\":%llu,\"contextBytes\":%llu,"
                 "\"kvType\":\"%s\"}",
                 lw_model_arch(w->m), lw_model_n_vocab(w->m), lw_model_n_layer(w->m), lw_model_n_embd(w->m),
                 lw_context_n_ctx(w->c), lw_context_n_batch(w->c), (int)lw_context_n_threads(w->c),
                 (int)w->threads_wanted, (unsigned long long)lw_model_weight_bytes(w->m),
                 (unsigned long long)lw_context_bytes(w->c), lw_type_get(w->kv_type)->name);
    return n < cap ? n : -1;
}

/* ---------------------------------------------------------------------------------------------------------
 * Text (over any lw_model with a vocabulary: the CPU engine's or a GPU model's header-only one)
 * ------------------------------------------------------------------------------------------------------- */

/* Tokenizes text[0..len) into out (cap ids; add_special: BOS etc. as the vocabulary asks; control-token texts
 * stay text). Returns the count, or -1 (no tokenizer, or more than cap ids). */
EMSCRIPTEN_KEEPALIVE int lw_wasm_text_tokenize(lw_model *m, const char *text, int len, int add_special,
                                               int32_t *out, int cap) {
    size_t n = 0;
    if (!m || len < 0 || cap < 0 ||
        lw_model_tokenize(m, text, (size_t)len, add_special, 0, out, (size_t)cap, &n) != LW_OK ||
        n > (size_t)INT32_MAX)
        return -1;
    return (int)n;
}

/* The text of token id (no NUL) into dst; returns its length, or -1. */
EMSCRIPTEN_KEEPALIVE int lw_wasm_text_piece(lw_model *m, int id, char *dst, int cap) {
    size_t n = 0;
    if (!m || cap < 0 || lw_model_token_to_piece(m, id, 0, dst, (size_t)cap, &n) != LW_OK) return -1;
    return (int)n;
}

/* Whether id ends generation (EOS, EOT, ...). */
EMSCRIPTEN_KEEPALIVE int lw_wasm_text_is_eog(const lw_model *m, int id) {
    const lw_vocab *v = m ? lw_model_vocab(m) : NULL;
    return v ? lw_vocab_is_eog(v, id) : 0;
}

/* lw_status_str for JS error objects (LlamawebError.statusText). */
EMSCRIPTEN_KEEPALIVE const char *lw_wasm_status_str(int st) {
    return st >= 0 && st < LW_STATUS_COUNT ? lw_status_str((lw_status)st) : "unknown status";
}
