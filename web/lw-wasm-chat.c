/* Chat templates for the browser package (web/llamaweb.mjs Model.chat): the Jinja template stored in a
 * model's GGUF header (tokenizer.chat_template, src/chat) rendered for a conversation, and the rendered text
 * tokenized with control tokens parsed (<|user|> -> its id), as llama.cpp's chat paths do. Compiled only by
 * the wasm build; the model is the header-only lw_model of a GPU model (lw_wasm_model_model). */
#include "core/core.h"

#include <emscripten/emscripten.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------------------------------------------------
 * Template
 * ------------------------------------------------------------------------------------------------------- */

/* A model's parsed chat template with the texts of its BOS and EOS tokens. */
typedef struct lw_wasm_chat {
    lw_chat_template *t;      /* parsed template (NULL: none or bad)             */
    const char *bos;          /* BOS token text, owned by the model's header     */
    const char *eos;          /* EOS token text, owned by the model's header     */
    char err[LW_ERRMSG_SIZE]; /* why the last call failed                        */
} lw_wasm_chat;

EMSCRIPTEN_KEEPALIVE void lw_wasm_chat_free(lw_wasm_chat *c) {
    if (!c) return;
    lw_chat_template_free(c->t);
    free(c);
}

EMSCRIPTEN_KEEPALIVE const char *lw_wasm_chat_error(const lw_wasm_chat *c) {
    return c ? c->err : "out of memory";
}

/* Parses model m's chat template. Returns NULL only when memory runs out; otherwise check
 * lw_wasm_chat_error() (empty: fine; a model without a template says so). The object must be freed before
 * the model (it points into the model's header). */
EMSCRIPTEN_KEEPALIVE lw_wasm_chat *lw_wasm_chat_new(lw_model *m) {
    lw_wasm_chat *c = calloc(1, sizeof *c);
    if (!c) return NULL;
    lw_gguf *g = m ? lw_model_gguf(m) : NULL;
    const char *tmpl = NULL;
    lw_status st = g ? lw_chat_from_gguf(g, &tmpl, &c->bos, &c->eos) : LW_ERR_INVALID_ARG;
    if (st == LW_ERR_NOT_FOUND || (st == LW_OK && !tmpl)) {
        lw__errorf(c->err, LW_ERR_NOT_FOUND, "the model has no chat template (tokenizer.chat_template)");
        return c;
    }
    if (st != LW_OK) {
        lw__errorf(c->err, st, "chat template: %s", lw_status_str(st));
        return c;
    }
    char why[LW_ERRMSG_SIZE] = "";
    st = lw_chat_template_parse(tmpl, strlen(tmpl), NULL, &c->t, why, sizeof why);
    if (st != LW_OK) lw__errorf(c->err, st, "chat template: %s", why[0] ? why : lw_status_str(st));
    return c;
}

/* The render options of c's template (its BOS/EOS texts). */
static lw_chat_params render_params(const lw_wasm_chat *c, int add_generation_prompt) {
    lw_chat_params p;
    lw_chat_params_default(&p);
    p.add_generation_prompt = add_generation_prompt != 0;
    p.bos_token = c->bos;
    p.eos_token = c->eos;
    return p;
}

/* A render's outcome (st, out of out_len bytes) as the entry points return it: out with *len, or NULL with
 * the message in c->err. */
static char *rendered(lw_wasm_chat *c, lw_status st, char *out, size_t out_len, int *len) {
    if (st != LW_OK) {
        lw__errorf(c->err, st, "chat template: %s", lw_chat_template_error(c->t));
        return NULL;
    }
    if (out_len > (size_t)INT32_MAX) {
        lw_chat_string_free(c->t, out);
        lw__errorf(c->err, LW_ERR_TOO_LARGE, "rendered prompt too large");
        return NULL;
    }
    c->err[0] = 0;
    *len = (int)out_len;
    return out;
}

/* Renders n messages (roles[i], contents[i]; a NULL content is none to the template), ending with the
 * assistant header when add_generation_prompt. Returns the text (free with lw_wasm_chat_string_free) and its
 * length in *len, or NULL with the message in lw_wasm_chat_error(). */
EMSCRIPTEN_KEEPALIVE char *lw_wasm_chat_render(lw_wasm_chat *c, const char *const *roles, const char *const *contents,
                                               int n, int add_generation_prompt, int *len) {
    *len = 0;
    if (!c->t) {
        if (!c->err[0]) lw__errorf(c->err, LW_ERR_INVALID_ARG, "no chat template");
        return NULL;
    }
    if (n < 0 || n > 100000) {
        lw__errorf(c->err, LW_ERR_INVALID_ARG, "bad message count %d", n);
        return NULL;
    }
    lw_chat_message *msgs = calloc(n ? (size_t)n : 1, sizeof *msgs);
    if (!msgs) {
        lw__errorf(c->err, LW_ERR_NOMEM, "out of memory");
        return NULL;
    }
    for (int i = 0; i < n; i++) {
        msgs[i].role = roles[i];
        msgs[i].content = contents[i];
    }
    const lw_chat_params p = render_params(c, add_generation_prompt);
    char *out = NULL;
    size_t out_len = 0;
    lw_status st = lw_chat_template_render(c->t, msgs, (size_t)n, &p, &out, &out_len);
    free(msgs);
    return rendered(c, st, out, out_len, len);
}

/* Renders a conversation given as JSON (messages: an array of OpenAI-shaped message objects, members such
 * as tool_calls and tool_call_id included; tools: OpenAI's tools array, NULL or "" for none), as
 * lw_wasm_chat_render (web/lw-structured.mjs: requests with tools). */
EMSCRIPTEN_KEEPALIVE char *lw_wasm_chat_render_json(lw_wasm_chat *c, const char *messages, int n, const char *tools,
                                                    int add_generation_prompt, int *len) {
    *len = 0;
    if (!c->t) {
        if (!c->err[0]) lw__errorf(c->err, LW_ERR_INVALID_ARG, "no chat template");
        return NULL;
    }
    if (n < 0 || (n > 0 && !messages)) {
        lw__errorf(c->err, LW_ERR_INVALID_ARG, "bad messages");
        return NULL;
    }
    lw_chat_params p = render_params(c, add_generation_prompt);
    p.tools = tools;
    char *out = NULL;
    size_t out_len = 0;
    lw_status st = lw_chat_template_render_json(c->t, messages, (size_t)n, &p, &out, &out_len);
    return rendered(c, st, out, out_len, len);
}

EMSCRIPTEN_KEEPALIVE void lw_wasm_chat_string_free(lw_wasm_chat *c, char *s) {
    if (c && s) lw_chat_string_free(c->t, s);
}

/* ---------------------------------------------------------------------------------------------------------
 * Tokenizing a rendered prompt
 * ------------------------------------------------------------------------------------------------------- */

/* Tokenizes text[0..len) with model m's vocabulary, control-token texts becoming their ids (parse_special;
 * add_special: BOS etc. as the vocabulary asks, usually off as the template writes BOS). Writes at most cap
 * ids to out; returns the full count (more than cap: call again with a larger buffer), or -1. */
EMSCRIPTEN_KEEPALIVE int lw_wasm_tokenize_special(lw_model *m, const char *text, int len, int add_special,
                                                  int32_t *out, int cap) {
    if (!m || len < 0 || cap < 0) return -1;
    size_t n = 0;
    lw_status st = lw_model_tokenize(m, text, (size_t)len, add_special, 1, out, (size_t)cap, &n);
    if (st != LW_OK && st != LW_ERR_TOO_LARGE) return -1;
    return n > (size_t)INT32_MAX ? -1 : (int)n;
}
