/* Structured output and embeddings for the browser package (web/lw-structured.mjs): grammars (GBNF, JSON
 * Schema, JSON mode, OpenAI tools) that choose a model's next token from logits in the heap, tool-call
 * parsing of a reply into OpenAI's tool_calls, and embeddings on the CPU engine's model. Both engines share
 * the grammar path: the CPU engine's logits are in the heap after a decode, the GPU model's after a decode
 * that reads them back (out 2), so a constrained step is the same C call (mask, then the CPU sampler's
 * greedy pick or draw) wherever the logits came from. Compiled only by the wasm build. */
#include "core/core.h"

#include <emscripten/emscripten.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* web/lw-wasm-cpu.c: the package's sampler settings (penalties off, as on the GPU) */
bool lw_wasm_sampling_params(float temp, int top_k, float top_p, float min_p, double seed,
                             lw_sampler_params *out, char *err);

/* ---------------------------------------------------------------------------------------------------------
 * Grammars
 * ------------------------------------------------------------------------------------------------------- */

/* A grammar over a model's vocabulary with the sampler that picks its tokens. */
typedef struct lw_wasm_grammar {
    lw_grammar *g;            /* the grammar (its vocabulary: the model's)                               */
    lw_sampler *s;            /* the CPU sampler with g attached (greedy until set_sampling says else)   */
    int32_t n_vocab;          /* the model's vocabulary size (logits per row)                            */
    uint32_t *mask;           /* (n_vocab + 31) / 32 words: the allowed tokens of the current step       */
    int mask_valid;           /* mask is the current step's (cleared by every accepted token)            */
    lw_status status;         /* status of the last failure (LW_OK: none)                                */
    char err[LW_ERRMSG_SIZE]; /* its message ("" when none)                                              */
} lw_wasm_grammar;

/* Which language lw_wasm_grammar_new is given. */
enum { GR_GBNF = 0, GR_JSON_SCHEMA = 1, GR_TOOLS = 2 };

static int gr_fail(lw_wasm_grammar *w, lw_status st, const char *what, const char *why) {
    w->status = st;
    lw__errorf(w->err, st, "%s: %s", what, why && why[0] ? why : lw_status_str(st));
    return (int)st;
}

EMSCRIPTEN_KEEPALIVE void lw_wasm_grammar_free(lw_wasm_grammar *w) {
    if (!w) return;
    lw_sampler_free(w->s); /* first: it points at the grammar */
    lw_grammar_free(w->g);
    free(w->mask);
    free(w);
}

EMSCRIPTEN_KEEPALIVE const char *lw_wasm_grammar_error(const lw_wasm_grammar *w) {
    return w ? w->err : "out of memory";
}
/* The lw_status of the last failure (0: none), for the JS error codes. */
EMSCRIPTEN_KEEPALIVE int lw_wasm_grammar_status(const lw_wasm_grammar *w) {
    return w ? (int)w->status : (int)LW_ERR_NOMEM;
}

/* Replaces the sampler (temp <= 0: greedy, first maximum); reseeds. Returns an lw_status. */
static lw_status gr_sampler(lw_wasm_grammar *w, float temp, int top_k, float top_p, float min_p,
                            double seed) {
    lw_sampler_params sp;
    char why[LW_ERRMSG_SIZE] = "";
    if (!lw_wasm_sampling_params(temp, top_k, top_p, min_p, seed, &sp, why))
        return (lw_status)gr_fail(w, LW_ERR_INVALID_ARG, "grammar", why);
    lw_sampler *s = NULL;
    lw_status st = lw_sampler_create(w->n_vocab, &sp, NULL, &s);
    if (st == LW_OK) st = lw_sampler_set_grammar(s, w->g);
    if (st != LW_OK) {
        lw_sampler_free(s);
        return (lw_status)gr_fail(w, st, "grammar", "sampler");
    }
    lw_sampler_free(w->s);
    w->s = s;
    return LW_OK;
}

/* A grammar for model m's vocabulary: kind 0 GBNF text (root: its start rule, NULL "root"), 1 a JSON Schema
 * (len 0: JSON mode, any JSON value), 2 OpenAI tools (a JSON array; root: the one function allowed, NULL any;
 * parallel: several calls; format: lw_tool_format). Returns NULL only when memory runs out; otherwise check
 * lw_wasm_grammar_error() (empty: fine; a grammar or schema refused says why, status INVALID_ARG and the
 * like) and free it either way. */
EMSCRIPTEN_KEEPALIVE lw_wasm_grammar *lw_wasm_grammar_new(lw_model *m, int kind, const char *text, int len,
                                                          const char *root, int parallel, int format) {
    lw_wasm_grammar *w = calloc(1, sizeof *w);
    if (!w) return NULL;
    const lw_vocab *v = m ? lw_model_vocab(m) : NULL;
    if (!v) {
        gr_fail(w, LW_ERR_INVALID_ARG, "grammar", "the model has no vocabulary");
        return w;
    }
    if (len < 0 || (len > 0 && !text)) {
        gr_fail(w, LW_ERR_INVALID_ARG, "grammar", "bad text");
        return w;
    }
    w->n_vocab = lw_model_n_vocab(m);
    const size_t n = (size_t)len;
    lw_status st;
    const char *what = "grammar";
    if (kind == GR_GBNF) {
        st = lw_grammar_parse(text, n, root, v, NULL, &w->g);
    } else if (kind == GR_JSON_SCHEMA) {
        what = n ? "json_schema" : "json mode";
        st = lw_grammar_from_json_schema(n ? text : NULL, n, v, NULL, &w->g);
    } else if (kind == GR_TOOLS) {
        what = "tools";
        if (format < (int)LW_TOOL_FORMAT_AUTO || format > (int)LW_TOOL_FORMAT_MISTRAL) {
            gr_fail(w, LW_ERR_INVALID_ARG, what, "unknown tool-call format");
            return w;
        }
        st = lw_grammar_from_tools(text, n, (lw_tool_format)format, root, parallel != 0, v, NULL, &w->g);
    } else {
        gr_fail(w, LW_ERR_INVALID_ARG, what, "unknown kind");
        return w;
    }
    if (st != LW_OK) {
        gr_fail(w, st, what, w->g ? lw_grammar_error(w->g) : NULL);
        return w;
    }
    const size_t words = ((size_t)w->n_vocab + 31) / 32;
    if (!(w->mask = calloc(words ? words : 1, sizeof *w->mask))) {
        gr_fail(w, LW_ERR_NOMEM, what, NULL);
        return w;
    }
    gr_sampler(w, 0, 0, 1, 0, 0);
    return w;
}

/* The CPU sampler's settings for the grammar's picks (as the engines' set_sampling: penalties off; temp <= 0
 * greedy); reseeds. Returns an lw_status (message: lw_wasm_grammar_error; the previous sampler stays). */
EMSCRIPTEN_KEEPALIVE int lw_wasm_grammar_set_sampling(lw_wasm_grammar *w, float temp, int top_k, float top_p,
                                                      float min_p, double seed) {
    if (!w->g) return gr_fail(w, LW_ERR_INVALID_ARG, "grammar", "not made");
    return (int)gr_sampler(w, temp, top_k, top_p, min_p, seed);
}

/* Back to the start of the language (a new generation); the sampler keeps its generator. */
EMSCRIPTEN_KEEPALIVE int lw_wasm_grammar_reset(lw_wasm_grammar *w) {
    if (!w->g) return LW_ERR_INVALID_ARG;
    w->mask_valid = 0;
    return (int)lw_grammar_reset(w->g);
}

/* Picks the next token from n_vocab logits (heap; not modified) among those the grammar allows (the
 * sampler's greedy pick or draw) and advances the grammar by it. Returns the id, or -1 (nothing is allowed:
 * the message says why). */
EMSCRIPTEN_KEEPALIVE int lw_wasm_grammar_pick(lw_wasm_grammar *w, const float *logits) {
    if (!w->g || !w->s || !logits) return gr_fail(w, LW_ERR_INVALID_ARG, "grammar", "not made"), -1;
    const int32_t id = lw_sampler_sample(w->s, logits);
    if (id < 0) {
        const char *why = lw_grammar_error(w->g);
        gr_fail(w, LW_ERR_INVALID_ARG, "grammar", why[0] ? why : "no token is allowed here");
        return -1;
    }
    lw_sampler_accept(w->s, id);
    w->mask_valid = 0;
    return id;
}

/* The allowed tokens of the current step as (n_vocab + 31) / 32 words (bit i of word i / 32: token i), for
 * the GPU to pick among them (lw_wasm_model_set_mask); valid until the next accepted token. NULL on failure
 * (the message says why). */
EMSCRIPTEN_KEEPALIVE const uint32_t *lw_wasm_grammar_mask(lw_wasm_grammar *w) {
    if (!w->g) return gr_fail(w, LW_ERR_INVALID_ARG, "grammar", "not made"), NULL;
    if (!w->mask_valid) {
        lw_status st = lw_grammar_mask(w->g, w->mask, ((size_t)w->n_vocab + 31) / 32);
        if (st != LW_OK) return gr_fail(w, st, "grammar", lw_grammar_error(w->g)), NULL;
        w->mask_valid = 1;
    }
    return w->mask;
}

/* 1 when token id is allowed now (the GPU's greedy token checked before any logits are read back), 0 when
 * not, -1 on failure. */
EMSCRIPTEN_KEEPALIVE int lw_wasm_grammar_allows(lw_wasm_grammar *w, int id) {
    if (!w->g || id < 0 || id >= w->n_vocab) return id < 0 || !w->g ? -1 : 0;
    const uint32_t *mask = lw_wasm_grammar_mask(w);
    return mask ? (int)(mask[id >> 5] >> (id & 31) & 1u) : -1;
}

/* Advances the grammar by token id (chosen elsewhere: an allowed GPU argmax). Returns an lw_status. */
EMSCRIPTEN_KEEPALIVE int lw_wasm_grammar_accept(lw_wasm_grammar *w, int id) {
    if (!w->g) return LW_ERR_INVALID_ARG;
    lw_status st = lw_grammar_accept_token(w->g, id);
    if (st != LW_OK) return gr_fail(w, st, "grammar", lw_grammar_error(w->g));
    w->mask_valid = 0;
    return LW_OK;
}

/* 1 when the output so far is a whole sentence of the grammar. */
EMSCRIPTEN_KEEPALIVE int lw_wasm_grammar_complete(const lw_wasm_grammar *w) {
    return w->g ? lw_grammar_is_complete(w->g) : 0;
}

/* The GBNF text of a JSON Schema (len 0: JSON mode) or of OpenAI tools (kind as lw_wasm_grammar_new), for
 * callers who want to see or keep it. Returns the text (free with lw_wasm_structured_free) or NULL with the
 * message in err (LW_ERRMSG_SIZE bytes). */
EMSCRIPTEN_KEEPALIVE char *lw_wasm_grammar_gbnf(int kind, const char *text, int len, const char *only,
                                                int parallel, int format, char *err) {
    char *out = NULL;
    size_t n = 0;
    err[0] = 0;
    if (len < 0 || (len > 0 && !text)) {
        lw__errorf(err, LW_ERR_INVALID_ARG, "bad text");
        return NULL;
    }
    lw_status st;
    if (kind == GR_JSON_SCHEMA)
        st = lw_json_schema_to_gbnf(len ? text : NULL, (size_t)len, NULL, &out, &n, err, LW_ERRMSG_SIZE);
    else if (kind == GR_TOOLS && format >= (int)LW_TOOL_FORMAT_AUTO && format <= (int)LW_TOOL_FORMAT_MISTRAL)
        st = lw_tool_grammar_gbnf(text, (size_t)len, (lw_tool_format)format, only, parallel != 0, NULL, &out,
                                  &n, err, LW_ERRMSG_SIZE);
    else
        st = lw__errorf(err, LW_ERR_INVALID_ARG, "unknown kind");
    if (st != LW_OK && !err[0]) lw__errorf(err, st, "%s", lw_status_str(st));
    return st == LW_OK ? out : NULL;
}

EMSCRIPTEN_KEEPALIVE void lw_wasm_structured_free(void *p) {
    free(p);
}

/* ---------------------------------------------------------------------------------------------------------
 * Tool calls
 * ------------------------------------------------------------------------------------------------------- */

/* The format model m's chat template teaches (lw_tool_format: 0 none found, 1 Hermes, 2 Llama 3, 3 Mistral).
 */
EMSCRIPTEN_KEEPALIVE int lw_wasm_tool_format(lw_model *m) {
    lw_gguf *g = m ? lw_model_gguf(m) : NULL;
    const char *tmpl = NULL;
    if (!g || lw_chat_from_gguf(g, &tmpl, NULL, NULL) != LW_OK) return (int)LW_TOOL_FORMAT_AUTO;
    return (int)lw_tool_format_detect(tmpl);
}

/* Parses a reply's tool calls (format: lw_tool_format). Returns the parse (free with
 * lw_wasm_tool_calls_free), NULL only when memory ran out; out[0..4] = the OpenAI tool_calls JSON (address,
 * bytes), the remaining content (address, bytes), the status (0: fine, else the message is at
 * lw_wasm_tool_calls_error). */
EMSCRIPTEN_KEEPALIVE lw_tool_calls *lw_wasm_tool_calls_parse(const char *text, int len, int format,
                                                             int32_t *out) {
    memset(out, 0, 5 * sizeof *out);
    lw_tool_calls *t = NULL;
    lw_status st = len < 0 || format < (int)LW_TOOL_FORMAT_AUTO || format > (int)LW_TOOL_FORMAT_MISTRAL
                       ? LW_ERR_INVALID_ARG
                       : lw_tool_calls_parse(text, (size_t)len, (lw_tool_format)format, NULL, &t);
    if (st == LW_ERR_INVALID_ARG && !t) {
        out[4] = (int32_t)st;
        return lw_tool_calls_parse("", 0, LW_TOOL_FORMAT_HERMES, NULL, &t) == LW_OK ? t : NULL;
    }
    if (!t) return NULL;
    out[4] = (int32_t)st;
    if (st != LW_OK) return t;
    size_t jn = 0, cn = 0;
    const char *j = lw_tool_calls_json(t, &jn);
    const char *c = lw_tool_calls_content(t, &cn);
    if (!j || jn > (size_t)INT32_MAX || cn > (size_t)INT32_MAX) {
        out[4] = (int32_t)LW_ERR_NOMEM;
        return t;
    }
    out[0] = (int32_t)(intptr_t)j;
    out[1] = (int32_t)jn;
    out[2] = (int32_t)(intptr_t)c;
    out[3] = (int32_t)cn;
    return t;
}

EMSCRIPTEN_KEEPALIVE const char *lw_wasm_tool_calls_error(const lw_tool_calls *t) {
    return lw_tool_calls_error(t);
}
EMSCRIPTEN_KEEPALIVE void lw_wasm_tool_calls_free(lw_tool_calls *t) {
    lw_tool_calls_free(t);
}

/* ---------------------------------------------------------------------------------------------------------
 * Embeddings (the CPU engine: an embeddings context of its own over the engine's model)
 * ------------------------------------------------------------------------------------------------------- */

/* An embeddings context over a loaded model. */
typedef struct lw_wasm_embed {
    lw_context *c;            /* embeddings context (final norm's output, no output head)                */
    int32_t n_embd;           /* floats per vector                                                       */
    uint32_t n_ctx;           /* its cells: the longest input it takes                                   */
    lw_status status;         /* status of the last failure (LW_OK: none)                                */
    char err[LW_ERRMSG_SIZE]; /* its message ("" when none)                                              */
} lw_wasm_embed;

EMSCRIPTEN_KEEPALIVE void lw_wasm_embed_free(lw_wasm_embed *w) {
    if (!w) return;
    lw_context_free(w->c);
    free(w);
}

EMSCRIPTEN_KEEPALIVE const char *lw_wasm_embed_error(const lw_wasm_embed *w) {
    return w ? w->err : "out of memory";
}
EMSCRIPTEN_KEEPALIVE int lw_wasm_embed_status(const lw_wasm_embed *w) {
    return w ? (int)w->status : (int)LW_ERR_NOMEM;
}
EMSCRIPTEN_KEEPALIVE int lw_wasm_embed_n_ctx(const lw_wasm_embed *w) {
    return w && w->c ? (int)w->n_ctx : 0;
}

/* An embeddings context of n_ctx cells (inputs up to that many tokens) and n_threads threads over model m
 * (its weights loaded: the CPU engine's). Returns NULL only when memory runs out; check lw_wasm_embed_error()
 * (empty: fine) and free it either way. */
EMSCRIPTEN_KEEPALIVE lw_wasm_embed *lw_wasm_embed_new(lw_model *m, int n_ctx, int n_threads) {
    lw_wasm_embed *w = calloc(1, sizeof *w);
    if (!w) return NULL;
    if (!m || n_ctx <= 0) {
        w->status = LW_ERR_INVALID_ARG;
        lw__errorf(w->err, LW_ERR_INVALID_ARG, "embeddings: %s", m ? "bad context size" : "no model");
        return w;
    }
    lw_context_params cp = lw_context_default_params();
    cp.embeddings = 1;
    cp.n_ctx = (uint32_t)n_ctx;
    cp.n_threads = n_threads < 1 ? 1 : n_threads;
    lw_status st = lw_context_create(m, &cp, &w->c);
    if (st != LW_OK && cp.n_threads > 1 && st != LW_ERR_NOMEM) { /* threads could not start: one */
        lw_context_free(w->c);
        w->c = NULL;
        cp.n_threads = 1;
        st = lw_context_create(m, &cp, &w->c);
    }
    if (st != LW_OK) {
        w->status = st;
        lw__errorf(w->err, st, "embeddings: %s", w->c ? lw_context_error(w->c) : lw_status_str(st));
        lw_context_free(w->c);
        w->c = NULL;
        return w;
    }
    w->n_embd = lw_model_n_embd(m);
    w->n_ctx = lw_context_n_ctx(w->c);
    return w;
}

/* Embeds n token ids (heap) into out (cap floats: n_embd, or n * n_embd for pooling 0 none) with pooling
 * (lw_pooling; -1 the model's) and normalize (llama.cpp's embd_normalize: -1 none, 2 L2, ...). Returns the
 * floats written, or -1 with the message in lw_wasm_embed_error() (status: lw_wasm_embed_status). */
EMSCRIPTEN_KEEPALIVE int lw_wasm_embed_run(lw_wasm_embed *w, const int32_t *ids, int n, int pooling,
                                           int normalize, float *out, int cap) {
    w->err[0] = 0;
    w->status = LW_OK;
    if (!w->c || n <= 0 || cap < 0 || pooling < -1 || pooling > (int)LW_POOLING_RANK) {
        w->status = LW_ERR_INVALID_ARG;
        lw__errorf(w->err, LW_ERR_INVALID_ARG, "embeddings: bad arguments");
        return -1;
    }
    lw_embed_params ep = lw_embed_default_params();
    ep.pooling = (lw_pooling)pooling;
    ep.normalize = normalize;
    size_t n_out = 0;
    lw_status st = lw_embed(w->c, ids, n, &ep, out, (size_t)cap, &n_out);
    if (st != LW_OK || n_out > (size_t)INT32_MAX) {
        w->status = st != LW_OK ? st : LW_ERR_TOO_LARGE;
        lw__errorf(w->err, w->status, "embeddings: %s", lw_context_error(w->c));
        return -1;
    }
    return (int)n_out;
}

/* The pooling model m's file asks for (<arch>.pooling_type; -1 none), and llama.cpp's normalisation of a
 * vector (for vectors pooled in JS: the GPU model's rows). */
EMSCRIPTEN_KEEPALIVE int lw_wasm_model_pooling(const lw_model *m) {
    return m ? (int)lw_model_pooling(m) : -1;
}
EMSCRIPTEN_KEEPALIVE void lw_wasm_embed_normalize(const float *in, float *out, int n, int normalize) {
    if (n > 0) lw_embed_normalize(in, out, n, normalize);
}
