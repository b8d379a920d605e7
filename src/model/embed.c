/* Embeddings: the hidden states of a sequence (the final norm's output for every token, as llama.cpp's
 * t_embd) pooled into one vector and normalised, as llama.cpp's llama_get_embeddings_seq and its
 * common_embd_normalize. Contexts made with lw_context_params.embeddings run a graph cut after the final
 * norm (lw__embed_graph_cut): no output head, no logits, every output row's hidden state kept. */
#include "model/embed.h"

#include "core/core.h"
#include "model/model.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

lw_status lw__embed_graph_cut(lw__graph *g, int32_t *embd) {
    if (g->status != LW_OK) return g->status;
    for (int32_t n = g->n_nodes; n-- > 0;) {
        int32_t d = g->nodes[n].dst;
        if (d < 0 || !g->t[d].name || strcmp(g->t[d].name, "result_norm") != 0) continue;
        /* a builder that normalises every token and selects the output rows after (gemma4): those rows */
        if (n + 1 < g->n_nodes && g->nodes[n + 1].op == LW_OP_OUT_ROWS && g->nodes[n + 1].src[0] == d)
            d = g->nodes[++n].dst;
        g->n_nodes = n + 1; /* the output head and what follows it are never run nor planned */
        g->t[d].kind = LW_T_OUTPUT;
        *embd = d;
        return LW_OK;
    }
    return LW_ERR_UNSUPPORTED;
}

lw_embed_params lw_embed_default_params(void) {
    lw_embed_params p;
    p.pooling = LW_POOLING_UNSPECIFIED;
    p.normalize = -1;
    return p;
}

/* The file's <arch>.pooling_type: 1 and *v when present (any integer width), 0 when absent or not an
 * integer. */
static int file_pooling(const lw_model *m, int64_t *v) {
    lw_gguf *g = lw_model_gguf(m);
    const char *arch = lw_model_arch(m);
    char key[160];
    if (!g || !arch || (size_t)snprintf(key, sizeof key, "%s.pooling_type", arch) >= sizeof key) return 0;
    return lw_gguf_get_i64(g, key, v) == LW_OK;
}

lw_pooling lw_model_pooling(const lw_model *m) {
    int64_t v;
    if (!m || !file_pooling(m, &v) || v < LW_POOLING_NONE || v > LW_POOLING_RANK)
        return LW_POOLING_UNSPECIFIED;
    return (lw_pooling)v;
}

/* The pooling an embedding uses: the asked one, else the file's, else none (llama.cpp's rule). */
static lw_status resolve_pooling(lw_context *c, lw_pooling asked, lw_pooling *out) {
    char *err = lw__context_err(c);
    const lw_model *m = lw_context_model(c);
    int64_t v = asked;
    if (asked == LW_POOLING_UNSPECIFIED) {
        if (!file_pooling(m, &v))
            v = LW_POOLING_NONE;
        else if (v < LW_POOLING_NONE || v > LW_POOLING_RANK)
            return lw__errorf(err, LW_ERR_UNSUPPORTED,
                              "the file's %s.pooling_type %lld is not a pooling type", lw_model_arch(m),
                              (long long)v);
    }
    if (v == LW_POOLING_RANK)
        return lw__errorf(err, LW_ERR_UNSUPPORTED, "rank pooling needs a reranker's classification head");
    if (v < LW_POOLING_NONE || v > LW_POOLING_LAST)
        return lw__errorf(err, LW_ERR_INVALID_ARG, "unknown pooling type %lld", (long long)v);
    *out = (lw_pooling)v;
    return LW_OK;
}

void lw_embed_normalize(const float *in, float *out, int32_t n, int32_t normalize) {
    double sum = 0.0;
    if (normalize < 0) {
        sum = 1.0;
    } else if (normalize == 0) { /* the largest magnitude becomes 32760: an int16 range */
        for (int32_t i = 0; i < n; i++)
            if (sum < fabs((double)in[i])) sum = fabs((double)in[i]);
        sum /= 32760.0;
    } else if (normalize == 2) { /* Euclidean; float squares summed in double, as llama.cpp does */
        for (int32_t i = 0; i < n; i++) sum += in[i] * in[i];
        sum = sqrt(sum);
    } else { /* p-norm (1: taxicab) */
        for (int32_t i = 0; i < n; i++) sum += pow(fabs((double)in[i]), normalize);
        sum = pow(sum, 1.0 / normalize);
    }
    const float k = sum > 0.0 ? (float)(1.0 / sum) : 0.0f;
    for (int32_t i = 0; i < n; i++) out[i] = in[i] * k;
}

/* Whether the file declares non-causal attention (<arch>.attention.causal = false: encoder models), which
 * this engine does not compute. */
static int non_causal(const lw_model *m) {
    lw_gguf *g = lw_model_gguf(m);
    char key[160];
    int causal = 1;
    if (!g || (size_t)snprintf(key, sizeof key, "%s.attention.causal", lw_model_arch(m)) >= sizeof key)
        return 0;
    return lw_gguf_get_bool(g, key, &causal) == LW_OK && !causal;
}

lw_status lw_embed(lw_context *c, const int32_t *tokens, int32_t n, const lw_embed_params *params, float *out,
                   size_t cap, size_t *n_out) {
    if (n_out) *n_out = 0;
    if (!c) return LW_ERR_INVALID_ARG;
    char *err = lw__context_err(c);
    const lw_model *m = lw_context_model(c);
    if (!lw__context_embeddings(c))
        return lw__errorf(err, LW_ERR_INVALID_ARG, "lw_embed: the context was not made with embeddings = 1");
    if (!tokens || n <= 0) return lw__errorf(err, LW_ERR_INVALID_ARG, "lw_embed: no tokens");
    if (non_causal(m))
        return lw__errorf(err, LW_ERR_UNSUPPORTED,
                          "lw_embed: %s.attention.causal is false (an encoder model)", lw_model_arch(m));
    const lw_embed_params p = params ? *params : lw_embed_default_params();
    lw_pooling pool = LW_POOLING_NONE;
    lw_status st = resolve_pooling(c, p.pooling, &pool);
    if (st != LW_OK) return st;
    if ((uint64_t)n > lw_context_n_ctx(c))
        return lw__errorf(err, LW_ERR_TOO_LARGE, "lw_embed: %d tokens do not fit the %u-cell context", n,
                          lw_context_n_ctx(c));
    const size_t E = (size_t)lw_model_n_embd(m);
    size_t need = E;
    if (pool == LW_POOLING_NONE && !lw__mul_size(E, (size_t)n, &need))
        return lw__errorf(err, LW_ERR_OVERFLOW, "lw_embed: output too large");
    if (!out || cap < need)
        return lw__errorf(err, LW_ERR_INVALID_ARG, "lw_embed: %zu floats of room, %zu needed", out ? cap : 0,
                          need);

    if ((st = lw_context_set_n_past(c, 0)) != LW_OK) return st;
    if (pool == LW_POOLING_MEAN) memset(out, 0, E * sizeof(float));
    const float inv = 1.0f / (float)n; /* llama.cpp's inp_mean weights */
    const int32_t nb = (int32_t)lw_context_n_batch(c);
    for (int32_t done = 0; done < n;) {
        const int32_t step = n - done < nb ? n - done : nb;
        if ((st = lw_decode(c, tokens + done, step, 1)) != LW_OK) return st;
        for (int32_t i = 0; i < step; i++) {
            const int32_t t = done + i;
            const float *row = lw_get_embeddings(c, i);
            if (!row) return lw__errorf(err, LW_ERR_INVALID_ARG, "lw_embed: no hidden state for row %d", i);
            if (pool == LW_POOLING_NONE)
                memcpy(out + (size_t)t * E, row, E * sizeof(float));
            else if (pool == LW_POOLING_MEAN)
                for (size_t j = 0; j < E; j++) out[j] += row[j] * inv;
            else if ((pool == LW_POOLING_CLS && t == 0) || (pool == LW_POOLING_LAST && t == n - 1))
                memcpy(out, row, E * sizeof(float));
        }
        done += step;
    }
    if (p.normalize >= 0)
        for (size_t r = 0; r < need / E; r++)
            lw_embed_normalize(out + r * E, out + r * E, (int32_t)E, p.normalize);
    if (n_out) *n_out = need;
    return LW_OK;
}

lw_status lw_embed_batch(lw_context *c, const int32_t *const *inputs, const int32_t *lens, int32_t n_inputs,
                         const lw_embed_params *params, float *out, size_t cap, size_t *n_out) {
    if (n_out) *n_out = 0;
    if (!c) return LW_ERR_INVALID_ARG;
    if (!inputs || !lens || n_inputs <= 0)
        return lw__errorf(lw__context_err(c), LW_ERR_INVALID_ARG, "lw_embed_batch: no inputs");
    size_t used = 0;
    for (int32_t i = 0; i < n_inputs; i++) {
        size_t k = 0;
        lw_status st = lw_embed(c, inputs[i], lens[i], params, out ? out + used : NULL, cap - used, &k);
        if (st != LW_OK) {
            char *err = lw__context_err(c), msg[LW_ERRMSG_SIZE];
            memcpy(msg, err, LW_ERRMSG_SIZE);
            msg[LW_ERRMSG_SIZE - 1] = 0;
            return lw__errorf(err, st, "input %d: %s", i, msg);
        }
        used += k;
        if (n_out) *n_out = used;
    }
    return LW_OK;
}

lw_status lw_embed_text(lw_context *c, const char *text, size_t len, int add_special, int parse_special,
                        const lw_embed_params *params, float *out, size_t cap, size_t *n_out,
                        int32_t *n_tokens) {
    if (n_out) *n_out = 0;
    if (n_tokens) *n_tokens = 0;
    if (!c) return LW_ERR_INVALID_ARG;
    char *err = lw__context_err(c);
    lw_model *m = lw_context_model(c);
    if (!text && len) return lw__errorf(err, LW_ERR_INVALID_ARG, "lw_embed_text: NULL text");
    size_t n_cap;
    if (!lw__mul_size(len, 4, &n_cap) || !lw__add_size(n_cap, 2, &n_cap) || n_cap > INT32_MAX)
        return lw__errorf(err, LW_ERR_TOO_LARGE, "lw_embed_text: text too long");
    int32_t *ids = lw__calloc(&m->alloc, n_cap, sizeof(int32_t));
    if (!ids) return lw__errorf(err, LW_ERR_NOMEM, "lw_embed_text: out of memory");
    size_t n = 0;
    lw_status st = lw_model_tokenize(m, text ? text : "", len, add_special, parse_special, ids, n_cap, &n);
    if (st != LW_OK) {
        lw__errorf(err, st, "lw_embed_text: %s", lw_model_error(m));
    } else {
        if (n_tokens) *n_tokens = (int32_t)n;
        st = lw_embed(c, ids, (int32_t)n, params, out, cap, n_out);
    }
    lw__free(&m->alloc, ids);
    return st;
}
