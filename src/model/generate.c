/* Text through the model and the generation loop: lw_model_tokenize / lw_model_detokenize /
 * lw_model_token_to_piece (the model's own vocabulary, loaded with the weights), and lw_generate /
 * lw_generate_text (prompt -> decode -> sample -> stream each token's text -> decode it -> ...), driving the
 * generation state machine (src/model/gen.c: the stop rules) synchronously.
 *
 * The loop allocates nothing: sampling, the streaming detokenizer and lw_decode work in memory made before
 * the first token (a text prompt's token ids and, for vocabularies with very long pieces, the text buffer
 * are the only allocations, made once per call before the loop). tests/test-engine-alloc.c counts it. */
#include "model/model.h"

#include <string.h>

/* Text bytes one streamed token may produce before we need a heap buffer (every ordinary vocabulary). */
#define STACK_PIECE 1024

/* ---------------------------------------------------------------------------------------------------------
 * Text through the model's vocabulary
 * ------------------------------------------------------------------------------------------------------- */

const lw_vocab *lw_model_vocab(const lw_model *m) {
    return m ? m->vocab : NULL;
}

/* The model's vocabulary, or NULL with a message on the model saying why there is none. */
static const lw_vocab *need_vocab(lw_model *m) {
    if (!m->vocab) lw__errorf(m->err, LW_ERR_UNSUPPORTED, "the model has no usable tokenizer (%s)", m->vocab_why);
    return m->vocab;
}

lw_status lw_model_tokenize(lw_model *m, const char *text, size_t len, int add_special, int parse_special,
                            int32_t *out, size_t cap, size_t *n_out) {
    if (!m || !n_out || (!text && len) || (!out && cap)) return LW_ERR_INVALID_ARG;
    const lw_vocab *v = need_vocab(m);
    if (!v) return LW_ERR_UNSUPPORTED;
    lw_status st = lw_tokenize(v, text ? text : "", len, add_special, parse_special, out, cap, n_out);
    if (st == LW_ERR_TOO_LARGE)
        lw__errorf(m->err, st, "%zu token ids do not fit in %zu", *n_out, cap);
    else if (st != LW_OK)
        lw__errorf(m->err, st, "tokenizing failed: %s", lw_status_str(st));
    return st;
}

lw_status lw_model_detokenize(lw_model *m, const int32_t *tokens, size_t n, int remove_special,
                              int unparse_special, char *buf, size_t cap, size_t *n_out) {
    if (!m || !n_out || (!tokens && n) || (!buf && cap)) return LW_ERR_INVALID_ARG;
    const lw_vocab *v = need_vocab(m);
    if (!v) return LW_ERR_UNSUPPORTED;
    lw_status st = lw_detokenize(v, tokens, n, remove_special, unparse_special, buf, cap, n_out);
    if (st == LW_ERR_TOO_LARGE)
        lw__errorf(m->err, st, "the text (up to %zu bytes) does not fit in %zu", *n_out, cap);
    else if (st != LW_OK)
        lw__errorf(m->err, st, "detokenizing failed: %s (a token outside the vocabulary?)", lw_status_str(st));
    return st;
}

lw_status lw_model_token_to_piece(lw_model *m, int32_t id, int special, char *buf, size_t cap, size_t *n_out) {
    if (!m || !n_out || (!buf && cap)) return LW_ERR_INVALID_ARG;
    const lw_vocab *v = need_vocab(m);
    if (!v) return LW_ERR_UNSUPPORTED;
    lw_status st = lw_token_to_piece(v, id, special, 0, buf, cap, n_out);
    if (st == LW_ERR_TOO_LARGE)
        lw__errorf(m->err, st, "token %d's text (%zu bytes) does not fit in %zu", id, *n_out, cap);
    else if (st != LW_OK)
        lw__errorf(m->err, st, "token %d is outside the vocabulary", id);
    return st;
}

/* ---------------------------------------------------------------------------------------------------------
 * Generation
 * ------------------------------------------------------------------------------------------------------- */

lw_generate_params lw_generate_default_params(void) {
    lw_generate_params p;
    memset(&p, 0, sizeof p);
    p.n_predict = 128;
    return p;
}

/* Hands text to the callback; returns its verdict (0: go on). */
static int emit(const lw_generate_params *p, int32_t token, const char *text, size_t n) {
    return p->on_token ? p->on_token(p->user, token, text, n) : 0;
}

lw_status lw_generate(lw_context *c, lw_sampler *s, const int32_t *prompt, size_t n_prompt,
                      const lw_generate_params *params, lw_generate_result *res) {
    /* res is written only at the end: the prompt may be res->last (continuing a generation) */
    lw_generate_result r = {0, 0, -1, LW_STOP_NONE};
    if (!c) return LW_ERR_INVALID_ARG;
    char *err = lw__context_err(c);
    if (!s || !params || (!prompt && n_prompt)) {
        if (res) *res = r;
        return lw__errorf(err, LW_ERR_INVALID_ARG, "lw_generate: NULL sampler, params or prompt");
    }
    if (n_prompt > INT32_MAX) {
        if (res) *res = r;
        return lw__errorf(err, LW_ERR_TOO_LARGE, "lw_generate: %zu prompt tokens", n_prompt);
    }
    lw_model *m = lw_context_model(c);
    const lw_vocab *v = m->vocab;

    /* Setup: the generation's rules (src/model/gen.c) in a buffer on the stack unless pieces can be huge. */
    lw_gen_params gp = lw_gen_default_params();
    gp.n_predict = params->n_predict;
    gp.ignore_eog = params->ignore_eog;
    gp.special = params->special;
    gp.n_ctx = lw_context_n_ctx(c);
    gp.stop = params->stop;
    gp.stop_len = params->stop_len;
    gp.n_stop = params->n_stop;
    char stack_buf[2 * STACK_PIECE + 8], *buf = stack_buf;
    size_t need = lw_gen_buffer_size(v, &gp);
    if (need == 0) {
        if (res) *res = r;
        return lw__errorf(err, LW_ERR_TOO_LARGE, "lw_generate: the pieces or stop strings are too long");
    }
    if (need > sizeof stack_buf && !(buf = lw__malloc(&m->alloc, need))) {
        if (res) *res = r;
        return lw__errorf(err, LW_ERR_NOMEM, "lw_generate: out of memory for %zu bytes of text", need);
    }
    lw_gen g;
    lw_gen_step step;
    lw_status st = lw_gen_init(&g, v, &gp, buf, need);
    if (st != LW_OK) {
        lw__errorf(err, st, "lw_generate: %s", lw_gen_error(&g));
        goto done;
    }
    /* The prompt: recorded for the sampler's penalties, then decoded in batches. Without a prompt the loop
     * continues from the logits of the context's last decode. */
    if ((st = lw_gen_start(&g, prompt, n_prompt, lw_context_n_past(c), &step)) != LW_OK) {
        lw__errorf(err, st, "lw_generate: %s", lw_gen_error(&g));
        goto done;
    }
    for (size_t i = 0; i < n_prompt; i++) lw_sampler_accept(s, prompt[i]);
    for (;;) {
        if (step.n_ids > 0 && (st = lw_decode(c, step.ids, (int32_t)step.n_ids, 0)) != LW_OK) goto done;
        if (step.token < 0) r.n_prompt = (int32_t)n_prompt;
        r.last = -1;
        if (!step.sample) break;
        if (step.token < 0 && n_prompt == 0 && !lw_get_logits(c, -1)) {
            st = lw__errorf(err, LW_ERR_INVALID_ARG, "lw_generate: no prompt and no logits to continue from");
            goto done;
        }
        int32_t id = lw_sample(c, s, -1);
        lw_gen_push(&g, id, &step);
        r.last = id;
        if (params->tokens && (size_t)r.n_generated < params->tokens_cap) params->tokens[r.n_generated] = id;
        r.n_generated++;
        if (emit(params, id, step.text, step.text_len) && step.stop != LW_STOP_EOG)
            lw_gen_stop(&g, LW_STOP_CALLBACK, &step);
        if (!step.sample) { /* over: the last token stays undecoded (nothing would read its logits) */
            /* a character that never completed */
            if (step.tail_len > 0) emit(params, -1, step.tail, step.tail_len);
            break;
        }
    }
    r.stop = step.stop;
done:
    if (buf != stack_buf) lw__free(&m->alloc, buf);
    if (res) *res = r;
    return st;
}

lw_status lw_generate_text(lw_context *c, lw_sampler *s, const char *text, size_t len, int add_special,
                           int parse_special, const lw_generate_params *params, lw_generate_result *res) {
    if (res) *res = (lw_generate_result){0, 0, -1, LW_STOP_NONE};
    if (!c) return LW_ERR_INVALID_ARG;
    char *err = lw__context_err(c);
    lw_model *m = lw_context_model(c);
    if (!text && len) return lw__errorf(err, LW_ERR_INVALID_ARG, "lw_generate_text: NULL text");
    /* a tokenization never has more than 4 ids per byte plus BOS/EOS (lw_tokenize's bound) */
    uint64_t cap;
    if (!lw__mul_u64((uint64_t)len, 4, &cap) || !lw__add_u64(cap, 2, &cap) || cap > SIZE_MAX / sizeof(int32_t))
        return lw__errorf(err, LW_ERR_TOO_LARGE, "lw_generate_text: a %zu-byte prompt", len);
    int32_t *ids = lw__malloc(&m->alloc, (size_t)cap * sizeof(int32_t));
    if (!ids) return lw__errorf(err, LW_ERR_NOMEM, "lw_generate_text: out of memory for %llu token ids",
                                (unsigned long long)cap);
    size_t n = 0;
    lw_status st = lw_model_tokenize(m, text ? text : "", len, add_special, parse_special, ids, (size_t)cap, &n);
    if (st != LW_OK)
        lw__errorf(err, st, "lw_generate_text: %s", lw_model_error(m));
    else
        st = lw_generate(c, s, ids, n, params, res);
    lw__free(&m->alloc, ids);
    return st;
}
