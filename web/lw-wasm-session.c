/* Chat sessions for the browser package (web/llamaweb.mjs Chat, model.newChat): a conversation whose KV cache
 * lives in the GPU model and is kept across turns (lw_chat_session_new_model, include/llamaweb.h "Chat
 * sessions"). C plans each turn (renders the conversation with the chat template, finds what the cache already
 * holds, tokenizes the new part, follows the reply token by token); JS decodes on the GPU what it is told,
 * asynchronously, between calls.
 *
 * Each call leaves its results in a small int32 array (lw_wasm_session_out, slots LW_WS_*) that JS reads from
 * the heap, so a reply token costs one call and no allocation on either side. Texts go both ways as bytes and
 * lengths: NUL bytes in messages and replies survive. Compiled only by the wasm build; the model is the
 * header-only lw_model of a GPU model (lw_wasm_model_model), which must outlive the session. */
#include "core/core.h"

#include <emscripten/emscripten.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------------------------------------------------
 * State
 * ------------------------------------------------------------------------------------------------------- */

/* Result slots of lw_wasm_session_out (int32 each; pointers are wasm32 addresses). web/llamaweb.mjs reads
 * them by these numbers: keep the two in step. */
enum {
    LW_WS_STATUS = 0,    /* lw_status of the last call                                        */
    LW_WS_DECODE = 1,    /* push: 1 when the caller must decode the token now                 */
    LW_WS_STOP = 2,      /* lw_stop_reason of the turn (LW_STOP_NONE while the reply goes on)  */
    LW_WS_PIECE = 3,     /* push: address of the token's text                                  */
    LW_WS_PIECE_LEN = 4, /* push: its bytes                                                    */
    LW_WS_FROM_CELL = 5, /* user: cell where the prompt ids go (cells before it are reused)    */
    LW_WS_N_PROMPT = 6,  /* user: how many prompt ids                                          */
    LW_WS_PROMPT = 7,    /* user: address of the prompt ids                                    */
    LW_WS_RESTARTED = 8, /* user: 1 when the context was full and the conversation started over */
    LW_WS_RESUMED = 9,   /* user: 1 when decoding resumed at an earlier chunk boundary          */
    LW_WS_N_GEN = 10,    /* reply tokens pushed so far                                         */
    LW_WS_TEXT = 11,     /* reply / message / tokens: address of the bytes or ids              */
    LW_WS_TEXT_LEN = 12, /* their count                                                        */
    LW_WS_ROLE = 13,     /* message: address of the role (NUL-terminated)                      */
    LW_WS_COUNT
};

/* A chat session with its result slots. */
typedef struct lw_wasm_session {
    lw_chat_session *s;       /* the session (NULL only when memory ran out making it) */
    int32_t out[LW_WS_COUNT]; /* results of the last call, read by JS                 */
} lw_wasm_session;

/* Stores the figures of the current turn and st into the result slots; returns st. */
static int note(lw_wasm_session *w, lw_status st) {
    const lw_chat_turn *t = lw_chat_session_turn(w->s);
    w->out[LW_WS_STATUS] = (int32_t)st;
    w->out[LW_WS_STOP] = t ? (int32_t)t->stop : 0;
    w->out[LW_WS_N_GEN] = t ? t->n_generated : 0;
    return (int)st;
}

/* ---------------------------------------------------------------------------------------------------------
 * Making and freeing
 * ------------------------------------------------------------------------------------------------------- */

/* A session over model m with n_ctx cells (the GPU model's context). system: the system prompt of system_len
 * bytes (NULL: none); template_src: a Jinja template (NUL-terminated; NULL: the model's, or the plain format
 * when it has none); special: control tokens' text in replies. Returns NULL only when memory runs out;
 * otherwise check lw_wasm_session_out()[LW_WS_STATUS] (0: fine) and lw_wasm_session_error(), and free it
 * either way (a failed one takes no other call). */
EMSCRIPTEN_KEEPALIVE lw_wasm_session *lw_wasm_session_new(lw_model *m, int n_ctx, const char *system, int system_len,
                                                          const char *template_src, int special) {
    lw_wasm_session *w = calloc(1, sizeof *w);
    if (!w) return NULL;
    lw_chat_session_params p = lw_chat_session_default_params();
    p.system = system;
    p.system_len = system ? (size_t)(system_len < 0 ? 0 : system_len) : LW_CHAT_NUL_TERMINATED;
    p.template_src = template_src;
    p.special = special != 0;
    lw_status st = n_ctx > 0 ? lw_chat_session_new_model(m, (uint32_t)n_ctx, &p, &w->s) : LW_ERR_INVALID_ARG;
    w->out[LW_WS_STATUS] = (int32_t)st; /* w->s is NULL when memory ran out or m / n_ctx were bad */
    return w;
}

EMSCRIPTEN_KEEPALIVE void lw_wasm_session_free(lw_wasm_session *w) {
    if (!w) return;
    lw_chat_session_free(w->s);
    free(w);
}

/* The result slots (LW_WS_COUNT int32 values). */
EMSCRIPTEN_KEEPALIVE int32_t *lw_wasm_session_out(lw_wasm_session *w) {
    return w->out;
}

/* Message of the last failed call ("" when none). */
EMSCRIPTEN_KEEPALIVE const char *lw_wasm_session_error(const lw_wasm_session *w) {
    if (!w->s) return w->out[LW_WS_STATUS] == LW_ERR_NOMEM ? "out of memory" : "no model or no context cells";
    return lw_chat_session_error(w->s);
}

/* The template in use: 0 given, 1 the model's, 2 the plain format. */
EMSCRIPTEN_KEEPALIVE int lw_wasm_session_template(const lw_wasm_session *w) {
    return (int)lw_chat_session_template(w->s, NULL);
}

/* ---------------------------------------------------------------------------------------------------------
 * Turns
 * ------------------------------------------------------------------------------------------------------- */

/* Adds a user message of len bytes (NUL bytes allowed) and plans its turn: the caller sets its cache to
 * LW_WS_FROM_CELL cells and decodes the LW_WS_N_PROMPT ids at LW_WS_PROMPT there, then samples the reply.
 * Returns the status (the conversation is unchanged on failure). */
EMSCRIPTEN_KEEPALIVE int lw_wasm_session_user(lw_wasm_session *w, const char *msg, int len) {
    if (len < 0) return note(w, LW_ERR_INVALID_ARG);
    lw_chat_turn t;
    memset(&t, 0, sizeof t);
    lw_status st = lw_chat_session_user(w->s, msg, (size_t)len, &t);
    size_t n = 0;
    const int32_t *ids = lw_chat_session_prompt(w->s, &n);
    w->out[LW_WS_FROM_CELL] = st == LW_OK ? (int32_t)t.from_cell : 0;
    w->out[LW_WS_N_PROMPT] = st == LW_OK ? (int32_t)n : 0; /* n < n_ctx: fits an int32 */
    w->out[LW_WS_PROMPT] = (int32_t)(uintptr_t)ids;
    w->out[LW_WS_RESTARTED] = t.restarted;
    w->out[LW_WS_RESUMED] = t.resumed;
    return note(w, st);
}

/* Records the reply's next token id (sampled by the caller). LW_WS_DECODE says whether to decode it now,
 * LW_WS_PIECE/LW_WS_PIECE_LEN give the text it completes (valid until the next call), LW_WS_STOP whether the
 * reply ended. */
EMSCRIPTEN_KEEPALIVE int lw_wasm_session_push(lw_wasm_session *w, int id) {
    int decode = 0;
    const char *piece = "";
    size_t len = 0;
    lw_status st = lw_chat_session_push(w->s, id, &decode, &piece, &len);
    w->out[LW_WS_DECODE] = decode;
    w->out[LW_WS_PIECE] = (int32_t)(uintptr_t)piece;
    w->out[LW_WS_PIECE_LEN] = (int32_t)len; /* at most one token's text and a few flushed bytes */
    return note(w, st);
}

/* Ends the open reply as generated so far (the caller has decoded every token it was told to).
 * LW_WS_PIECE/LW_WS_PIECE_LEN: the text the reply still held back (lw_chat_session_tail), to hand on. */
EMSCRIPTEN_KEEPALIVE int lw_wasm_session_end_reply(lw_wasm_session *w) {
    lw_status st = lw_chat_session_end_reply(w->s);
    size_t len = 0;
    const char *tail = lw_chat_session_tail(w->s, &len);
    w->out[LW_WS_PIECE] = (int32_t)(uintptr_t)tail;
    w->out[LW_WS_PIECE_LEN] = (int32_t)len; /* shorter than the longest stop string, plus 3 bytes */
    return note(w, st);
}

/* Limits of the next replies (lw_chat_session_set_limits): n_predict (< 0: none) and n_stop stop strings,
 * their bytes one after the other at stops, stop_lens[i] bytes each (copied). */
EMSCRIPTEN_KEEPALIVE int lw_wasm_session_set_limits(lw_wasm_session *w, int n_predict, const char *stops,
                                                    const int32_t *stop_lens, int n_stop) {
    enum { MAX_STOPS = 64 }; /* the package passes the request's few; more are refused */
    const char *p[MAX_STOPS];
    size_t n[MAX_STOPS];
    if (n_stop < 0 || n_stop > MAX_STOPS || (n_stop && (!stops || !stop_lens)))
        return note(w, LW_ERR_INVALID_ARG);
    for (int i = 0, at = 0; i < n_stop; at += stop_lens[i++]) {
        if (stop_lens[i] < 0) return note(w, LW_ERR_INVALID_ARG);
        p[i] = stops + at;
        n[i] = (size_t)stop_lens[i];
    }
    return note(w, lw_chat_session_set_limits(w->s, n_predict, p, n, (size_t)n_stop));
}

/* Undoes the last turn after the caller's decode failed; the next turn decodes from cell 0. */
EMSCRIPTEN_KEEPALIVE void lw_wasm_session_abort(lw_wasm_session *w) {
    lw_chat_session_abort_turn(w->s);
    note(w, LW_OK);
}

/* Back to the system prompt alone, cache forgotten. */
EMSCRIPTEN_KEEPALIVE void lw_wasm_session_reset(lw_wasm_session *w) {
    lw_chat_session_reset(w->s);
    note(w, LW_OK);
}

/* ---------------------------------------------------------------------------------------------------------
 * The conversation
 * ------------------------------------------------------------------------------------------------------- */

/* The reply being generated or last generated: LW_WS_TEXT, LW_WS_TEXT_LEN bytes. */
EMSCRIPTEN_KEEPALIVE void lw_wasm_session_reply(lw_wasm_session *w) {
    size_t len = 0;
    const char *p = lw_chat_session_reply(w->s, &len);
    w->out[LW_WS_TEXT] = (int32_t)(uintptr_t)p;
    w->out[LW_WS_TEXT_LEN] = len > (size_t)INT32_MAX ? INT32_MAX : (int32_t)len;
}

/* The token ids the caller's cache holds for the conversation: LW_WS_TEXT, LW_WS_TEXT_LEN ids. */
EMSCRIPTEN_KEEPALIVE void lw_wasm_session_tokens(lw_wasm_session *w) {
    size_t n = 0;
    const int32_t *p = lw_chat_session_tokens(w->s, &n);
    w->out[LW_WS_TEXT] = (int32_t)(uintptr_t)p;
    w->out[LW_WS_TEXT_LEN] = (int32_t)n; /* at most n_ctx */
}

EMSCRIPTEN_KEEPALIVE int lw_wasm_session_n_messages(const lw_wasm_session *w) {
    size_t n = lw_chat_session_n_messages(w->s);
    return n > (size_t)INT32_MAX ? INT32_MAX : (int)n;
}

/* Message i: LW_WS_ROLE (NUL-terminated), LW_WS_TEXT and LW_WS_TEXT_LEN (its content's bytes). */
EMSCRIPTEN_KEEPALIVE int lw_wasm_session_message(lw_wasm_session *w, int i) {
    const char *role = "", *content = "";
    size_t len = 0;
    lw_status st = i < 0 ? LW_ERR_INVALID_ARG : lw_chat_session_message(w->s, (size_t)i, &role, &content, &len);
    if (st != LW_OK || len > (size_t)INT32_MAX) st = LW_ERR_INVALID_ARG, role = "", content = "", len = 0;
    w->out[LW_WS_ROLE] = (int32_t)(uintptr_t)role;
    w->out[LW_WS_TEXT] = (int32_t)(uintptr_t)content;
    w->out[LW_WS_TEXT_LEN] = (int32_t)len;
    return (int)st;
}

/* Adds a message (role NUL-terminated, content of len bytes) without decoding: a conversation restored from
 * storage; the next user message decodes it with the rest. */
EMSCRIPTEN_KEEPALIVE int lw_wasm_session_add(lw_wasm_session *w, const char *role, const char *content, int len) {
    if (len < 0) return note(w, LW_ERR_INVALID_ARG);
    return note(w, lw_chat_session_add(w->s, role, content, (size_t)len));
}
