/* Whole models on WebGPU from JS (web/lw-model.mjs, web/cli.mjs, tests/web/model.test.mjs): a GGUF file held
 * by a host byte source (lwGpu.addSource) is opened header-only (weights never enter the wasm heap), its
 * tokenizer read, and the GPU model (src/webgpu/gpu-model.h) created over it; JS then awaits lwGpu.settle()
 * between calls. A CPU engine over a file held in the heap serves as the reference in tests. Compiled only
 * by the wasm build. */
#include "core/core.h"
#include "model/model.h"
#include "webgpu/gpu-model.h"
#include "webgpu/gpu-tune.h"

#include <emscripten/emscripten.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

lw_status lw_wasm_gpu_open(const lw_allocator *alloc, lw_gpu *out); /* lw-gpu-wasm.c */
/* lw-wasm-cpu.c: the package's sampler settings (penalties off), the greedy pick */
bool lw_wasm_sampling_params(float temp, int top_k, float top_p, float min_p, double seed, lw_sampler_params *out,
                             char *err);
int32_t lw_wasm_argmax(const float *logits, int32_t n);

/* Synchronous read of a host source (the GGUF header is parsed in C, the host serves it with readSync: a
 * Node file, bytes, or a prefetched head of a Blob). Returns 0 on success. */
EM_JS(int, lw_js_source_read_sync, (uint32_t id, double off, void *dst, double n), {
    try {
        const s = Module['lwGpu'].sources[id];
        if (!s || !s.readSync) return 1;
        const b = s.readSync(off, n);
        if (!b || b.length !== n) return 1;
        HEAPU8.set(b, dst);
        return 0;
    } catch (e) {
        return 1;
    }
});

/* ---------------------------------------------------------------------------------------------------------
 * GPU model
 * ------------------------------------------------------------------------------------------------------- */

/* A model on the GPU with its tokenizer. */
typedef struct lw_wasm_model {
    uint32_t host;            /* host source of the GGUF file        */
    lw_source *src;           /* the same, read synchronously        */
    lw_model *m;              /* header-only model                   */
    const lw_vocab *vocab;    /* its tokenizer (the model's; NULL: none) */
    lw__gpu_model *g;         /* the GPU plan                        */
    char err[LW_ERRMSG_SIZE]; /* why the last call failed            */
    char serr[LW_ERRMSG_SIZE]; /* why the last set_sampling failed (the model stays usable) */
} lw_wasm_model;

static lw_status host_read(void *user, uint64_t off, void *dst, size_t n) {
    const lw_wasm_model *w = user;
    return lw_js_source_read_sync(w->host, (double)off, dst, (double)n) ? LW_ERR_IO : LW_OK;
}

EMSCRIPTEN_KEEPALIVE void lw_wasm_model_free(lw_wasm_model *w) {
    if (!w) return;
    lw__gpu_model_free(w->g);
    lw_model_free(w->m);
    lw_source_close(w->src);
    free(w);
}

EMSCRIPTEN_KEEPALIVE const char *lw_wasm_model_error(const lw_wasm_model *w) {
    return w ? w->err : "out of memory";
}

/* ---------------------------------------------------------------------------------------------------------
 * Kernel tune overrides (gpu-tune.h) for lw_wasm_model_open: per-key setters or the JSON of web/tune.mjs
 * ------------------------------------------------------------------------------------------------------- */

/* A set of overrides and the last error. */
typedef struct lw_wasm_tune {
    lw__gpu_tune t;           /* the overrides                 */
    char err[LW_ERRMSG_SIZE]; /* why the last call failed      */
} lw_wasm_tune;

EMSCRIPTEN_KEEPALIVE lw_wasm_tune *lw_wasm_tune_new(void) {
    lw_wasm_tune *t = calloc(1, sizeof *t);
    if (t) lw__gpu_tune_init(&t->t);
    return t;
}
EMSCRIPTEN_KEEPALIVE void lw_wasm_tune_free(lw_wasm_tune *t) {
    free(t);
}
EMSCRIPTEN_KEEPALIVE const char *lw_wasm_tune_error(const lw_wasm_tune *t) {
    return t ? t->err : "out of memory";
}
/* Applies the JSON text json[0..len) (all or nothing); returns an lw_status (message: lw_wasm_tune_error). */
EMSCRIPTEN_KEEPALIVE int lw_wasm_tune_json(lw_wasm_tune *t, const char *json, int len) {
    return len < 0 ? LW_ERR_INVALID_ARG : lw__gpu_tune_json(&t->t, json, (size_t)len, t->err);
}
/* Sets one key ("matvec.q4_0.wg"); returns an lw_status. */
EMSCRIPTEN_KEEPALIVE int lw_wasm_tune_set(lw_wasm_tune *t, const char *key, double value) {
    if (!(value >= -2147483648.0 && value <= 2147483647.0) || value != (double)(int64_t)value)
        return lw__errorf(t->err, LW_ERR_INVALID_ARG, "%s: not an integer", key ? key : "(null)");
    return lw__gpu_tune_set(&t->t, key, (int64_t)value, t->err);
}
/* The overrides set, as JSON, into dst; returns the length or -1. */
EMSCRIPTEN_KEEPALIVE int lw_wasm_tune_to_json(const lw_wasm_tune *t, char *dst, int cap) {
    return cap > 0 ? lw__gpu_tune_to_json(&t->t, dst, (size_t)cap) : -1;
}

/* ---------------------------------------------------------------------------------------------------------
 * Opening
 * ------------------------------------------------------------------------------------------------------- */

/* Opens the model of host source `host` (size bytes) and plans it on the GPU; weights start streaming (await
 * settle(), then lw_wasm_model_check()). f16/subgroups: -1 = as the device offers; kv_type: the KV cache's
 * LW_TYPE (F16, F32, Q8_0 or Q4_0; -1: f16; others fail in the plan); tune: kernel overrides (NULL: the
 * measured defaults; read during this call only); exact: the CPU engine's bits in norms and attention (1),
 * the GPUs' f32 kernels (0), or on CPU adapters only (-1); rows_embd: token embedding rows kept on the GPU by
 * the row store (0: the whole table; lw_wasm_model_rows_json says what the store does). Returns NULL only
 * when memory runs out; otherwise check lw_wasm_model_error() (empty: fine). */
EMSCRIPTEN_KEEPALIVE lw_wasm_model *lw_wasm_model_open(uint32_t host, double size, int n_ctx, int n_batch,
                                                       int submit_every, int f16, int subgroups, int kv_type,
                                                       const lw_wasm_tune *tune, int exact, int rows_embd) {
    lw_wasm_model *w = calloc(1, sizeof *w);
    if (!w) return NULL;
    w->host = host;
    lw_status st = lw_source_from_callbacks((uint64_t)size, host_read, NULL, w, NULL, &w->src);
    if (st != LW_OK) {
        lw__errorf(w->err, st, "source: %s", lw_status_str(st));
        return w;
    }
    lw_model_params mp = lw_model_default_params();
    mp.no_weights = 1;
    if ((st = lw_model_load_source(w->src, &mp, &w->m)) != LW_OK) {
        lw__errorf(w->err, st, "model: %s", lw_model_error(w->m));
        return w;
    }
    w->vocab = lw_model_vocab(w->m); /* NULL: ids only */
    lw_gpu gpu;
    if ((st = lw_wasm_gpu_open(NULL, &gpu)) != LW_OK) {
        lw__errorf(w->err, st, "no GPU device");
        return w;
    }
    lw__gpu_model_params p = lw__gpu_model_default_params();
    p.host_source = host;
    p.n_ctx = n_ctx > 0 ? (uint32_t)n_ctx : 0;
    p.n_batch = n_batch > 0 ? (uint32_t)n_batch : 0;
    p.submit_every = submit_every > 0 ? (uint32_t)submit_every : 0;
    p.f16 = f16;
    p.subgroups = subgroups;
    p.kv_type = kv_type < 0 ? LW_TYPE_F16 : (uint32_t)kv_type;
    p.exact_norm = p.exact_attn = exact < 0 ? -1 : exact != 0; /* the CPU's bits: a test switch */
    p.tune = tune ? &tune->t : NULL;
    p.rows_embd = rows_embd > 0 ? (uint32_t)rows_embd : 0;
    if ((st = lw__gpu_model_create(gpu, w->m, &p, &w->g)) != LW_OK)
        lw__errorf(w->err, st, "GPU plan: %s", lw__gpu_model_error(w->g));
    return w;
}

/* After settle(): 0 when the GPU reported no error, else 1 with the message in lw_wasm_model_error(). */
EMSCRIPTEN_KEEPALIVE int lw_wasm_model_check(lw_wasm_model *w) {
    if (w->err[0]) return 1;
    const lw_gpu *gpu = lw__gpu_model_gpu(w->g);
    const char *e = gpu->ops->error(gpu->ctx);
    if (e) {
        lw__errorf(w->err, LW_ERR_IO, "GPU: %.230s", e);
        return 1;
    }
    return 0;
}

/* Decodes n tokens at ids (wasm memory) and schedules the read-back: out 1 = argmax id, 2 = logits, 3 = a
 * token drawn on the GPU (lw_wasm_model_set_sampling), 0 none.
 * Returns an lw_status; await settle() before reading the result. */
EMSCRIPTEN_KEEPALIVE int lw_wasm_model_decode(lw_wasm_model *w, const int32_t *ids, int n, int out) {
    if (w->err[0]) return LW_ERR_INVALID_ARG;
    lw_status st = lw__gpu_model_decode(w->g, ids, n, (lw__gpu_out)out);
    if (st != LW_OK) lw__errorf(w->err, st, "decode: %s", lw__gpu_model_error(w->g));
    return st;
}

/* A grammar's allowed-token bitmask (ceil(n_vocab / 32) words in wasm memory) for the next decode that
 * picks an id (lw__gpu_model_set_mask: the argmax or draw among the allowed ids on the GPU); an lw_status. */
EMSCRIPTEN_KEEPALIVE int lw_wasm_model_set_mask(lw_wasm_model *w, const uint32_t *bits, int words) {
    if (w->err[0]) return LW_ERR_INVALID_ARG;
    lw_status st = words < 0 ? LW_ERR_INVALID_ARG : lw__gpu_model_set_mask(w->g, bits, (size_t)words);
    if (st != LW_OK) lw__errorf(w->err, st, "decode: %s", lw__gpu_model_error(w->g));
    return st;
}

/* A chained one-token step (lw__gpu_model_decode_next; out 1 argmax, 3 sample): returns the ring slot whose
 * id (lw_wasm_model_chain_ids()[slot]) the step's read fills, or -1 with the message in
 * lw_wasm_model_error() (LW_ERR_TOO_LARGE at the context's end leaves the model usable). */
EMSCRIPTEN_KEEPALIVE int lw_wasm_model_decode_next(lw_wasm_model *w, int out) {
    if (w->err[0]) return -1;
    int32_t slot = -1;
    lw_status st = lw__gpu_model_decode_next(w->g, (lw__gpu_out)out, &slot);
    if (st == LW_ERR_TOO_LARGE) return -2;
    if (st != LW_OK) {
        lw__errorf(w->err, st, "decode: %s", lw__gpu_model_error(w->g));
        return -1;
    }
    return slot;
}

EMSCRIPTEN_KEEPALIVE const int32_t *lw_wasm_model_chain_ids(const lw_wasm_model *w) {
    return lw__gpu_model_chain_ids(w->g);
}

/* Undoes the last k chained steps (lw__gpu_model_rewind); 0 on success. */
EMSCRIPTEN_KEEPALIVE int lw_wasm_model_rewind(lw_wasm_model *w, int k) {
    if (k < 0) return LW_ERR_INVALID_ARG;
    lw_status st = lw__gpu_model_rewind(w->g, (uint32_t)k);
    if (st != LW_OK) lw__errorf(w->err, st, "rewind: %s", lw__gpu_model_error(w->g));
    return st;
}

/* Sampling parameters of decodes with out 3 (lw__gpu_model_set_sampling; penalties off); reseeds. Returns the
 * top-k in effect (the GPU caps it), or -1 with the message in lw_wasm_model_sampling_error() (refused
 * parameters leave the previous ones and the model usable). */
EMSCRIPTEN_KEEPALIVE int lw_wasm_model_set_sampling(lw_wasm_model *w, float temp, int top_k, float top_p, float min_p,
                                                    double seed) {
    w->serr[0] = 0;
    if (w->err[0] || !w->g) {
        snprintf(w->serr, sizeof w->serr, "%s", w->err[0] ? w->err : "no model");
        return -1;
    }
    lw_sampler_params sp;
    if (!lw_wasm_sampling_params(temp, top_k, top_p, min_p, seed, &sp, w->serr)) return -1;
    uint32_t k = 0;
    lw_status st = lw__gpu_model_set_sampling(w->g, &sp, &k);
    if (st != LW_OK) {
        lw__errorf(w->serr, st, "sampling: %s", lw__gpu_model_error(w->g));
        return -1;
    }
    return (int)k;
}

EMSCRIPTEN_KEEPALIVE const char *lw_wasm_model_sampling_error(const lw_wasm_model *w) {
    return w->serr;
}

/* The plan's kernel variants as JSON (lw__gpu_model_variants_json); returns the length or -1. */
EMSCRIPTEN_KEEPALIVE int lw_wasm_model_variants_json(const lw_wasm_model *w, char *dst, int cap) {
    return w->g && cap > 0 ? lw__gpu_model_variants_json(w->g, dst, (size_t)cap) : -1;
}

EMSCRIPTEN_KEEPALIVE int lw_wasm_model_token(const lw_wasm_model *w) {
    return lw__gpu_model_token(w->g);
}
EMSCRIPTEN_KEEPALIVE const float *lw_wasm_model_logits(const lw_wasm_model *w) {
    return lw__gpu_model_logits(w->g);
}
/* The header-only lw_model under w (web/lw-wasm-chat.c reads its chat template and tokenizes with it). */
EMSCRIPTEN_KEEPALIVE lw_model *lw_wasm_model_model(const lw_wasm_model *w) {
    return w ? w->m : NULL;
}
EMSCRIPTEN_KEEPALIVE int lw_wasm_model_n_vocab(const lw_wasm_model *w) {
    return lw_model_n_vocab(w->m);
}
EMSCRIPTEN_KEEPALIVE int lw_wasm_model_n_past(const lw_wasm_model *w) {
    return (int)lw__gpu_model_n_past(w->g);
}
EMSCRIPTEN_KEEPALIVE int lw_wasm_model_set_n_past(lw_wasm_model *w, int n_past) {
    return n_past < 0 ? LW_ERR_INVALID_ARG : lw__gpu_model_set_n_past(w->g, (uint32_t)n_past);
}

/* Facts about the plan and what it did, as JSON (counters, dispatches per step, bytes). */
EMSCRIPTEN_KEEPALIVE int lw_wasm_model_info_json(const lw_wasm_model *w, char *dst, int cap) {
    if (!w->g || !dst || cap <= 0) return -1;
    lw__gpu_model_counters c = lw__gpu_model_get_counters(w->g);
    uint64_t wb, kv, acts;
    lw__gpu_model_bytes(w->g, &wb, &kv, &acts);
    const lw__gpu_model *g = w->g;
    int n = snprintf(dst, (size_t)cap,
                     "{\"arch\":\"%s\",\"n_vocab\":%d,\"n_layer\":%d,\"n_embd\":%d,\"n_ctx\":%u,\"buffers\":%llu,"
                     "\"pipelines\":%llu,\"bindGroups\":%llu,\"dispatches\":%llu,\"submits\":%llu,\"steps\":%llu,"
                     "\"stepDispatches\":%llu,\"weightBytes\":%llu,\"kvBytes\":%llu,\"actBytes\":%llu,"
                     "\"kvType\":\"%s\",\"maskedSteps\":%llu}",
                     lw_model_arch(w->m), lw_model_n_vocab(w->m), lw_model_n_layer(w->m), lw_model_n_embd(w->m),
                     lw__gpu_model_n_ctx(g), (unsigned long long)c.buffers, (unsigned long long)c.pipelines,
                     (unsigned long long)c.bind_groups, (unsigned long long)c.dispatches,
                     (unsigned long long)c.submits, (unsigned long long)c.steps,
                     (unsigned long long)lw__gpu_model_step_dispatches(g), (unsigned long long)wb,
                     (unsigned long long)kv, (unsigned long long)acts,
                     lw_type_get(lw__gpu_model_kv_type(g))->name, (unsigned long long)c.masked);
    return n < cap ? n : -1;
}

/* ---------------------------------------------------------------------------------------------------------
 * The row store of token_embd (lw__gpu_model_rows_*: the host loads a step's rows and awaits them first)
 * ------------------------------------------------------------------------------------------------------- */

/* Tokens per decode call while the store serves the table (0: not in use, any count). */
EMSCRIPTEN_KEEPALIVE int lw_wasm_model_rows_step(const lw_wasm_model *w) {
    return w->g ? (int)lw__gpu_model_rows_step(w->g) : 0;
}

/* Makes the rows of ids[0..n) resident (streams from the host source for the misses): returns how many were
 * loaded (> 0: await settle() before the decode), or -1 with the message in lw_wasm_model_error(). */
EMSCRIPTEN_KEEPALIVE int lw_wasm_model_rows_load(lw_wasm_model *w, const int32_t *ids, int n) {
    if (w->err[0]) return -1;
    uint32_t loads = 0;
    lw_status st = lw__gpu_model_rows_load(w->g, ids, n, &loads);
    if (st != LW_OK) {
        lw__errorf(w->err, st, "row store: %s", lw__gpu_model_error(w->g));
        return -1;
    }
    return (int)loads;
}

/* After a chained step that gathered id: 1 when its row was resident (the step stands), 0 when not (undo it
 * and the steps after it, then decode id from the host). */
EMSCRIPTEN_KEEPALIVE int lw_wasm_model_rows_check(lw_wasm_model *w, int id) {
    return lw__gpu_model_rows_check(w->g, id);
}

/* The store's state and counters as JSON: {"asked":bool,"active":bool,"status":N,"message":"...","nRows":..,
 * "nSlots":..,"rowBytes":..,"lookups":..,"hits":..,"misses":..,"warmLoads":..,"evictions":..,"bytesRead":..,
 * "rewinds":..}. Returns the length or -1. */
EMSCRIPTEN_KEEPALIVE int lw_wasm_model_rows_json(const lw_wasm_model *w, char *dst, int cap) {
    if (!w->g || !dst || cap <= 0) return -1;
    const char *msg = "";
    const lw_status st = lw__gpu_model_rows_status(w->g, &msg);
    lw_rows_stats s;
    uint64_t rewinds = 0;
    lw__gpu_model_rows_stats(w->g, &s, &rewinds);
    char esc[2 * LW_ERRMSG_SIZE]; /* the message as a JSON string body */
    size_t k = 0;
    for (const char *c = msg; *c && k + 7 < sizeof esc; c++) {
        if (*c == '"' || *c == '\\') esc[k++] = '\\';
        if ((unsigned char)*c < 0x20) {
            k += (size_t)snprintf(esc + k, sizeof esc - k, "\\u%04x", (unsigned)*c);
            continue;
        }
        esc[k++] = *c;
    }
    esc[k] = 0;
    int n = snprintf(
        dst, (size_t)cap,
        "{\"asked\":%s,\"active\":%s,\"status\":%d,\"message\":\"%s\",\"nRows\":%u,\"nSlots\":%u,"
        "\"rowBytes\":%llu,\"lookups\":%llu,\"hits\":%llu,\"misses\":%llu,\"warmLoads\":%llu,"
        "\"evictions\":%llu,\"bytesRead\":%llu,\"rewinds\":%llu}",
        msg[0] ? "true" : "false", s.active ? "true" : "false", (int)st, esc, s.n_rows, s.n_slots,
        (unsigned long long)s.row_bytes, (unsigned long long)s.lookups, (unsigned long long)s.hits,
        (unsigned long long)s.misses, (unsigned long long)s.warm_loads, (unsigned long long)s.evictions,
        (unsigned long long)s.bytes_read, (unsigned long long)rewinds);
    return n < cap ? n : -1;
}

/* Debugging: lw__gpu_model_probe (await settle(), then read dst). Returns an lw_status. */
EMSCRIPTEN_KEEPALIVE int lw_wasm_model_probe(lw_wasm_model *w, const int32_t *ids, int n, int node, float *dst, int cap) {
    return lw__gpu_model_probe(w->g, ids, n, node, dst, (uint64_t)cap);
}

/* Node i's output name into dst; returns the node count; *layer and *ne0 as lw__gpu_model_node. */
EMSCRIPTEN_KEEPALIVE int lw_wasm_model_node(const lw_wasm_model *w, int i, char *dst, int cap, int32_t *layer, double *ne0) {
    const char *name = "";
    int64_t e = 0;
    *layer = -1;
    int n = lw__gpu_model_node(w->g, i, &name, layer, &e);
    snprintf(dst, (size_t)cap, "%s", name);
    *ne0 = (double)e;
    return n;
}

/* ---------------------------------------------------------------------------------------------------------
 * Text
 * ------------------------------------------------------------------------------------------------------- */

/* Tokenizes text[0..len) into out (cap ids); returns the count, or -1 (message in lw_wasm_model_error). */
EMSCRIPTEN_KEEPALIVE int lw_wasm_model_tokenize(lw_wasm_model *w, const char *text, int len, int add_special,
                                                int32_t *out, int cap) {
    if (!w->vocab) {
        lw__errorf(w->err, LW_ERR_UNSUPPORTED, "the model has no tokenizer this build reads");
        return -1;
    }
    size_t n = 0;
    lw_status st = lw_tokenize(w->vocab, text, (size_t)len, add_special, 0, out, (size_t)cap, &n);
    if (st != LW_OK) {
        lw__errorf(w->err, st, "tokenize: %s", lw_status_str(st));
        return -1;
    }
    return (int)n;
}

/* The text of token id (no NUL) into dst; returns its length, or -1. */
EMSCRIPTEN_KEEPALIVE int lw_wasm_model_piece(lw_wasm_model *w, int id, char *dst, int cap) {
    size_t n = 0;
    if (!w->vocab || lw_token_to_piece(w->vocab, id, 0, 0, dst, (size_t)cap, &n) != LW_OK) return -1;
    return (int)n;
}

/* Whether id ends generation (EOS, EOT, ...). */
EMSCRIPTEN_KEEPALIVE int lw_wasm_model_is_eog(const lw_wasm_model *w, int id) {
    return w->vocab ? lw_vocab_is_eog(w->vocab, id) : 0;
}

/* ---------------------------------------------------------------------------------------------------------
 * The CPU engine as the reference (a whole file in the heap: small models only)
 * ------------------------------------------------------------------------------------------------------- */

/* A CPU model and context. */
typedef struct lw_wasm_cpu {
    lw_source *src;           /* over the bytes                       */
    void *bytes;              /* the file (owned)                     */
    lw_model *m;              /* fully loaded model                   */
    lw_context *c;            /* one-thread context                   */
    char err[LW_ERRMSG_SIZE]; /* why the last call failed             */
} lw_wasm_cpu;

EMSCRIPTEN_KEEPALIVE void lw_wasm_cpu_free(lw_wasm_cpu *r) {
    if (!r) return;
    lw_context_free(r->c);
    lw_model_free(r->m);
    lw_source_close(r->src);
    free(r->bytes);
    free(r);
}

EMSCRIPTEN_KEEPALIVE const char *lw_wasm_cpu_error(const lw_wasm_cpu *r) {
    return r ? r->err : "out of memory";
}

/* Takes ownership of bytes (size, from malloc) holding a GGUF file; kv_f32: an f32 KV cache (else f16). */
EMSCRIPTEN_KEEPALIVE lw_wasm_cpu *lw_wasm_cpu_open(void *bytes, double size, int n_ctx, int kv_f32) {
    lw_wasm_cpu *r = calloc(1, sizeof *r);
    if (!r) return NULL;
    r->bytes = bytes;
    lw_status st = lw_source_from_memory(bytes, (size_t)size, NULL, &r->src);
    lw_model_params mp = lw_model_default_params();
    mp.no_vocab = 1; /* ids only: the reference needs no tokenizer */
    if (st == LW_OK && (st = lw_model_load_source(r->src, &mp, &r->m)) != LW_OK) {
        lw__errorf(r->err, st, "model: %s", lw_model_error(r->m));
        return r;
    }
    lw_context_params cp = lw_context_default_params();
    cp.n_threads = 1; /* no pthreads in this build */
    cp.n_ctx = n_ctx > 0 ? (uint32_t)n_ctx : 0;
    if (kv_f32) cp.type_k = cp.type_v = LW_TYPE_F32;
    if (st == LW_OK && (st = lw_context_create(r->m, &cp, &r->c)) != LW_OK)
        lw__errorf(r->err, st, "context: %s", lw_context_error(r->c));
    else if (st != LW_OK)
        lw__errorf(r->err, st, "source: %s", lw_status_str(st));
    return r;
}

/* Decodes n tokens; returns the greedy next id (first maximum, as the GPU argmax), or -1. */
EMSCRIPTEN_KEEPALIVE int lw_wasm_cpu_decode(lw_wasm_cpu *r, const int32_t *ids, int n) {
    if (r->err[0]) return -1;
    lw_status st = lw_decode(r->c, ids, n, 0);
    if (st != LW_OK) {
        lw__errorf(r->err, st, "decode: %s", lw_context_error(r->c));
        return -1;
    }
    return lw_wasm_argmax(lw_get_logits(r->c, -1), lw_model_n_vocab(r->m));
}

/* Debugging: the CPU's output of tensor `name` in block `layer` while decoding ids (n_past is restored). */
typedef struct probe_target {
    const char *name; /* wanted tensor  */
    int32_t layer;    /* its block      */
    float *dst;       /* where to copy  */
    int64_t cap;      /* floats of dst  */
    int64_t got;      /* floats copied  */
} probe_target;

static void probe_cb(void *user, const char *name, int32_t layer, const float *data, int64_t ne0, int64_t rows) {
    probe_target *p = user;
    if (strcmp(name, p->name) || layer != p->layer) return;
    int64_t n = ne0 * rows < p->cap ? ne0 * rows : p->cap;
    memcpy(p->dst, data, (size_t)n * sizeof(float));
    p->got = n;
}

EMSCRIPTEN_KEEPALIVE int lw_wasm_cpu_probe(lw_wasm_cpu *r, const int32_t *ids, int n, const char *name, int layer,
                                           float *dst, int cap) {
    probe_target p = {name, layer, dst, cap, 0};
    uint32_t past = lw_context_n_past(r->c);
    lw_context_set_eval_callback(r->c, probe_cb, &p);
    lw_status st = lw_decode(r->c, ids, n, 1);
    lw_context_set_eval_callback(r->c, NULL, NULL);
    lw_context_set_n_past(r->c, past);
    return st == LW_OK ? (int)p.got : -1;
}

EMSCRIPTEN_KEEPALIVE const float *lw_wasm_cpu_logits(const lw_wasm_cpu *r) {
    return lw_get_logits(r->c, -1);
}
