/* Chat sessions (lw_chat_session_*, include/llamaweb.h): a conversation rendered with a chat template and
 * decoded into one context whose KV cache is kept across turns.
 *
 * The cache holds the conversation's text up to the end of the last reply (kv_text). A new turn renders the
 * whole conversation again and decodes only what follows that text; chunk boundaries (checkpoints: bytes of
 * text <-> cells) let a turn resume from the last boundary that still matches when a template re-renders
 * earlier text differently. Each chunk is tokenized on its own; a reply stays in the cache as the tokens that
 * were generated (their text is what the next rendering contains at that place). A session made with
 * lw_chat_session_new_model has no context: it keeps the same books (the ids the caller's cache holds) and the
 * caller decodes what it is told (the WebGPU model, whose decodes are asynchronous in JavaScript).
 *
 * Texts carry lengths everywhere. The template renderer takes C strings, so a message with NUL bytes is
 * rendered with each NUL replaced by a Unicode noncharacter that occurs nowhere else (not in any message,
 * the template or the BOS/EOS texts) and the rendering gets its NULs back afterwards: one code point for one,
 * so lengths, slices and ASCII case mapping in the template see the same thing. (A template that writes a
 * message through tojson escapes the stand-in, so there the NUL does not come back: chat templates apply
 * tojson to tool calls and arguments, not to message contents.) */
#include "core/core.h"
#include "grammar/grammar.h"

#include <stdio.h>
#include <string.h>

/* ---------------------------------------------------------------------------------------------------------
 * State
 * ------------------------------------------------------------------------------------------------------- */

/* The plain format for models without a usable chat template (BOS comes from the tokenizer, see
 * chunk_tokens). */
static const char plain_template[] =
    "{% for m in messages %}"
    "{% if m.role == 'system' %}{{ m.content }}\n\n"
    "{% elif m.role == 'user' %}User: {{ m.content }}\n"
    "{% else %}Assistant:{{ m.content }}\n{% endif %}"
    "{% endfor %}"
    "{% if add_generation_prompt %}Assistant:{% endif %}";

/* A chunk boundary: the KV cache state when text [0, text_off) had been decoded. */
typedef struct cs_checkpoint {
    size_t text_off; /* bytes of the conversation text decoded so far */
    uint32_t n_past; /* cache cells then                             */
} cs_checkpoint;

/* A growable byte string, always NUL-terminated. */
typedef struct cs_buf {
    char *p;    /* bytes + NUL          */
    size_t len; /* used, without the NUL */
    size_t cap; /* allocated            */
} cs_buf;

/* One message of the conversation. */
typedef struct cs_message {
    char *role;    /* NUL-terminated copy                     */
    char *content; /* copy of len bytes + a NUL (may hold NULs) */
    size_t len;    /* content bytes                           */
} cs_message;

struct lw_chat_session {
    lw_allocator alloc;          /* the session's memory and the template's renders              */
    lw_context *c;               /* the context (KV cache kept across turns); NULL: the caller's  */
    lw_model *m;                 /* its model                                                    */
    const lw_vocab *v;           /* the model's vocabulary                                       */
    lw_chat_template *tmpl;      /* the template in use                                          */
    lw_chat_template_kind kind;  /* which one                                                    */
    char *tmpl_copy;             /* a given template's source (owned)                            */
    char *tools;                 /* the `tools` JSON given (owned; tp.tools points here), or NULL */
    const char *tmpl_src;        /* the source in use (for the NUL stand-in check)               */
    lw_chat_params tp;           /* render options (BOS/EOS texts from the model)                */
    cs_message *msgs;            /* the conversation                                             */
    size_t n_msgs, cap_msgs;     /* used / allocated                                             */
    size_t n_keep;               /* messages a restart or reset keeps (the system prompt)        */
    cs_buf kv_text;              /* the conversation text the KV cache holds                     */
    cs_checkpoint *cps;          /* chunk boundaries, cps[0] = {0, 0}                            */
    size_t n_cps, cap_cps;       /* used / allocated                                             */
    int32_t *ids;                /* token ids of the last chunk decoded                          */
    size_t n_ids, cap_ids;       /* used / allocated                                             */
    int32_t *cache;              /* the ids in the KV cache, n_ctx entries                       */
    uint32_t n_cache;            /* how many are valid (= the context's n_past)                  */
    uint32_t n_ctx;              /* the context's cells                                          */
    cs_buf reply;                /* the reply being generated or last generated                  */
    char *piece;                 /* the text handed on for the last generated token              */
    size_t piece_cap;            /* its size                                                     */
    lw_gen gen;                  /* the reply's generation rules (src/model/gen.c)               */
    lw_gen_step end;             /* the machine's last step (end.sample 0: the reply is over)    */
    char *gen_buf;               /* the machine's buffer                                         */
    size_t gen_cap;              /* its size                                                     */
    char **stops;                /* stop strings of the replies (copies; NULL: none)             */
    size_t *stop_lens;           /* their bytes                                                  */
    size_t n_stop;               /* how many                                                     */
    int32_t n_predict;           /* most tokens per reply (< 0: no limit)                        */
    int special;                 /* control tokens' text in the reply                            */
    int open;                    /* 1 while a reply is being generated                           */
    int accepted;                /* 1 once the turn's prompt ids went to the sampler             */
    int32_t pending;             /* sampled token not decoded yet, or -1                         */
    uint32_t past1;              /* cells after the turn's prompt (where the reply starts)       */
    size_t turn_first;           /* index of the last turn's user message (SIZE_MAX: none)       */
    lw_chat_turn turn;           /* figures of the last turn                                     */
    char why[LW_ERRMSG_SIZE];    /* why the plain format is used ("" when not for an error)      */
    char err[LW_ERRMSG_SIZE];    /* message of the last failed call                              */
};

/* ---------------------------------------------------------------------------------------------------------
 * Small helpers
 * ------------------------------------------------------------------------------------------------------- */

/* Makes room for `need` elements of `size` bytes in *p (capacity *cap, doubled as it grows). */
static int grow(const lw_allocator *a, void **p, size_t *cap, size_t need, size_t size) {
    if (need <= *cap) return 1;
    size_t n = *cap ? *cap : 16, bytes;
    while (n < need) {
        if (!lw__mul_size(n, 2, &n)) return 0;
    }
    if (!lw__mul_size(n, size, &bytes)) return 0;
    void *q = lw__realloc(a, *p, bytes);
    if (!q) return 0;
    *p = q, *cap = n;
    return 1;
}

/* Makes room for `extra` more bytes (and the NUL) in b. */
static int buf_reserve(const lw_allocator *a, cs_buf *b, size_t extra) {
    size_t need;
    if (!lw__add_size(b->len, extra, &need) || !lw__add_size(need, 1, &need)) return 0;
    return grow(a, (void **)&b->p, &b->cap, need, 1);
}

static int buf_append(const lw_allocator *a, cs_buf *b, const char *s, size_t n) {
    if (!buf_reserve(a, b, n)) return 0;
    if (n) memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = 0;
    return 1;
}

/* Where needle (n bytes) first occurs in hay (h bytes), or NULL. */
static const char *find_bytes(const char *hay, size_t h, const char *needle, size_t n) {
    for (size_t i = 0; n <= h && i <= h - n; i++)
        if (hay[i] == needle[0] && !memcmp(hay + i, needle, n)) return hay + i;
    return NULL;
}

/* A copy of s[0..len) + NUL from the session's allocator. */
static char *copy_bytes(lw_chat_session *s, const char *p, size_t len) {
    size_t n;
    if (!lw__add_size(len, 1, &n)) return NULL;
    char *q = lw__malloc(&s->alloc, n);
    if (!q) return NULL;
    if (len) memcpy(q, p, len);
    q[len] = 0;
    return q;
}

static int add_message(lw_chat_session *s, const char *role, const char *content, size_t len) {
    if (!grow(&s->alloc, (void **)&s->msgs, &s->cap_msgs, s->n_msgs + 1, sizeof *s->msgs)) return 0;
    char *r = copy_bytes(s, role, strlen(role)), *t = copy_bytes(s, content, len);
    if (!r || !t) {
        lw__free(&s->alloc, r);
        lw__free(&s->alloc, t);
        return 0;
    }
    s->msgs[s->n_msgs++] = (cs_message){r, t, len};
    return 1;
}

static void free_message(lw_chat_session *s, cs_message *m) {
    lw__free(&s->alloc, m->role);
    lw__free(&s->alloc, m->content);
}

/* Drops messages from index keep on. */
static void drop_messages(lw_chat_session *s, size_t keep) {
    while (s->n_msgs > keep) free_message(s, &s->msgs[--s->n_msgs]);
}

/* Records a chunk boundary (replaces the last one at the same text offset). Room for one more boundary was
 * made by the caller where failing would be awkward; otherwise this may fail (0). */
static int push_checkpoint(lw_chat_session *s, size_t text_off, uint32_t n_past) {
    if (s->n_cps && s->cps[s->n_cps - 1].text_off == text_off) {
        s->cps[s->n_cps - 1].n_past = n_past;
        return 1;
    }
    if (!grow(&s->alloc, (void **)&s->cps, &s->cap_cps, s->n_cps + 1, sizeof *s->cps)) return 0;
    s->cps[s->n_cps++] = (cs_checkpoint){text_off, n_past};
    return 1;
}

/* Forgets the KV cache: the next turn decodes the whole conversation. cps has room for one entry from the
 * start, so this cannot fail. */
static void forget_cache(lw_chat_session *s) {
    if (s->c) lw_context_set_n_past(s->c, 0);
    s->n_cache = 0;
    s->kv_text.len = 0;
    if (s->kv_text.p) s->kv_text.p[0] = 0;
    s->n_cps = 0;
    push_checkpoint(s, 0, 0);
}

/* ---------------------------------------------------------------------------------------------------------
 * Rendering (NUL-safe) and tokenizing
 * ------------------------------------------------------------------------------------------------------- */

/* Renders messages msgs[idx[0..n)] with the generation prompt into *out (the template's allocation; free with
 * lw_chat_string_free), *out_len bytes. Messages with NUL bytes go through a stand-in (see the file comment). */
static lw_status render(lw_chat_session *s, const size_t *idx, size_t n, char **out, size_t *out_len) {
    *out = NULL, *out_len = 0;
    lw_chat_message *v = lw__calloc(&s->alloc, n ? n : 1, sizeof *v);
    char **subst = lw__calloc(&s->alloc, n ? n : 1, sizeof *subst);
    lw_status st = LW_OK;
    if (!v || !subst) {
        st = lw__errorf(s->err, LW_ERR_NOMEM, "out of memory for %zu messages", n);
        goto done;
    }
    int has_nul = 0;
    for (size_t i = 0; i < n; i++) has_nul |= memchr(s->msgs[idx[i]].content, 0, s->msgs[idx[i]].len) != NULL;
    /* the stand-in: U+pFFFE / U+pFFFF for planes p = 1..16, the first that occurs nowhere else */
    char mark[4] = {0};
    if (has_nul) {
        int found = 0;
        for (unsigned k = 0; k < 32 && !found; k++) {
            uint32_t cp = ((k / 2 + 1) << 16) | 0xFFFEu | (k & 1);
            mark[0] = (char)(0xF0 | (cp >> 18)), mark[1] = (char)(0x80 | ((cp >> 12) & 63));
            mark[2] = (char)(0x80 | ((cp >> 6) & 63)), mark[3] = (char)(0x80 | (cp & 63));
            found = 1;
            for (size_t i = 0; i < n && found; i++)
                found = !find_bytes(s->msgs[idx[i]].content, s->msgs[idx[i]].len, mark, 4);
            const char *other[4] = {s->tmpl_src, s->tp.bos_token, s->tp.eos_token, s->tools};
            for (int j = 0; j < 4 && found; j++)
                found = !other[j] || !find_bytes(other[j], strlen(other[j]), mark, 4);
        }
        if (!found) {
            st = lw__errorf(s->err, LW_ERR_UNSUPPORTED,
                            "a message has NUL bytes and every stand-in noncharacter occurs in the conversation");
            goto done;
        }
    }
    for (size_t i = 0; i < n; i++) {
        const cs_message *m = &s->msgs[idx[i]];
        v[i].role = m->role;
        v[i].content = m->content;
        if (!has_nul || !memchr(m->content, 0, m->len)) continue;
        size_t cap;
        if (!lw__mul_size(m->len, 4, &cap) || !lw__add_size(cap, 1, &cap) ||
            !(subst[i] = lw__malloc(&s->alloc, cap))) {
            st = lw__errorf(s->err, LW_ERR_NOMEM, "out of memory for a %zu-byte message", m->len);
            goto done;
        }
        size_t k = 0;
        for (size_t j = 0; j < m->len; j++) {
            if (m->content[j]) {
                subst[i][k++] = m->content[j];
            } else {
                memcpy(subst[i] + k, mark, 4);
                k += 4;
            }
        }
        subst[i][k] = 0;
        v[i].content = subst[i];
    }
    s->tp.add_generation_prompt = 1;
    st = lw_chat_template_render(s->tmpl, v, n, &s->tp, out, out_len);
    if (st != LW_OK) {
        lw__errorf(s->err, st, "the chat template failed: %s", lw_chat_template_error(s->tmpl));
        goto done;
    }
    if (has_nul) { /* the stand-ins back to NUL bytes, in place */
        char *p = *out;
        size_t r = 0, w = 0, len = *out_len;
        while (r < len) {
            if (r + 4 <= len && !memcmp(p + r, mark, 4)) {
                p[w++] = 0;
                r += 4;
            } else {
                p[w++] = p[r++];
            }
        }
        p[w] = 0;
        *out_len = w;
    }
done:
    for (size_t i = 0; subst && i < n; i++) lw__free(&s->alloc, subst[i]);
    lw__free(&s->alloc, subst);
    lw__free(&s->alloc, v);
    return st;
}

/* Token ids of text (a chunk of the rendered conversation; control tokens written in it become their ids)
 * into s->ids. The first chunk starts with BOS when the vocabulary adds one and the template did not write
 * it. */
static lw_status chunk_tokens(lw_chat_session *s, const char *text, size_t len, int first) {
    size_t need, k = 0;
    /* lw_tokenize's bound: 4 ids per byte + 2, and BOS */
    if (!lw__mul_size(len, 4, &need) || !lw__add_size(need, 3, &need))
        return lw__errorf(s->err, LW_ERR_TOO_LARGE, "a %zu-byte conversation", len);
    if (!grow(&s->alloc, (void **)&s->ids, &s->cap_ids, need, sizeof *s->ids))
        return lw__errorf(s->err, LW_ERR_NOMEM, "out of memory for %zu token ids", need);
    const char *bos = s->tp.bos_token;
    size_t bos_len = bos ? strlen(bos) : 0;
    int32_t bos_id = lw_vocab_special(s->v, LW_TOKEN_BOS);
    if (first && lw_vocab_adds_bos(s->v) && bos_id >= 0 && !(bos_len && bos_len <= len && !memcmp(text, bos, bos_len)))
        s->ids[k++] = bos_id;
    size_t n = 0;
    lw_status st = lw_model_tokenize(s->m, text, len, 0, 1, s->ids + k, s->cap_ids - k, &n);
    if (st != LW_OK) return lw__errorf(s->err, st, "tokenizing the conversation: %s", lw_model_error(s->m));
    s->n_ids = n + k;
    return LW_OK;
}

/* ---------------------------------------------------------------------------------------------------------
 * Creating and freeing
 * ------------------------------------------------------------------------------------------------------- */

lw_chat_session_params lw_chat_session_default_params(void) {
    lw_chat_session_params p;
    memset(&p, 0, sizeof p);
    p.system_len = LW_CHAT_NUL_TERMINATED;
    p.fallback = 1;
    p.enable_thinking = -1;
    p.n_predict = -1;
    return p;
}

/* Parses src as the session's template. Returns LW_OK, LW_ERR_NOMEM, or another status with the parser's
 * message in s->why. */
static lw_status parse_template(lw_chat_session *s, const char *src) {
    char why[LW_ERRMSG_SIZE] = "";
    lw_status st = lw_chat_template_parse(src, strlen(src), &s->alloc, &s->tmpl, why, sizeof why);
    if (st == LW_OK) s->tmpl_src = src;
    else snprintf(s->why, sizeof s->why, "%s", why);
    return st;
}

/* The generation machine's settings for the next reply. */
static lw_gen_params gen_params(const lw_chat_session *s) {
    lw_gen_params p = lw_gen_default_params();
    p.n_predict = s->n_predict;
    p.special = s->special;
    p.decode_last = 1; /* the cache keeps the whole reply */
    p.n_ctx = s->n_ctx;
    p.stop = (const char *const *)s->stops;
    p.stop_len = s->stop_lens;
    p.n_stop = s->n_stop;
    return p;
}

/* Sizes the machine's buffer and the handed-on piece's (a token's text and the end's held text) for the
 * settings in s. */
static lw_status gen_buffers(lw_chat_session *s) {
    lw_gen_params p = gen_params(s);
    size_t need = lw_gen_buffer_size(s->v, &p);
    if (need == 0) return LW_ERR_TOO_LARGE;
    /* a token's handed-on text and the end's tail fit in the machine's own size */
    if (!grow(&s->alloc, (void **)&s->gen_buf, &s->gen_cap, need, 1) ||
        !grow(&s->alloc, (void **)&s->piece, &s->piece_cap, need, 1))
        return LW_ERR_NOMEM;
    return LW_OK;
}

/* A session over model m with n_ctx cells, decoding into context c (NULL: the caller decodes). */
static lw_status session_new(lw_model *m, lw_context *c, uint32_t n_ctx, const lw_chat_session_params *params,
                             lw_chat_session **out) {
    lw_chat_session_params p = params ? *params : lw_chat_session_default_params();
    lw_allocator a = lw__allocator_or_default(p.alloc);
    lw_chat_session *s = lw__calloc(&a, 1, sizeof *s);
    if (!s) return LW_ERR_NOMEM;
    *out = s;
    s->alloc = a;
    s->c = c;
    s->m = m;
    s->n_ctx = n_ctx;
    s->turn_first = SIZE_MAX;
    s->n_predict = p.n_predict;
    s->special = p.special;
    s->pending = -1;
    s->kind = LW_CHAT_TEMPLATE_PLAIN;
    if (!(s->v = lw_model_vocab(s->m))) {
        lw_model_tokenize(s->m, "", 0, 0, 0, NULL, 0, &(size_t){0}); /* leaves the reason on the model */
        return lw__errorf(s->err, LW_ERR_UNSUPPORTED, "%s", lw_model_error(s->m));
    }
    if (p.system && p.system_len == LW_CHAT_NUL_TERMINATED) p.system_len = strlen(p.system);
    if (!p.system && p.system_len && p.system_len != LW_CHAT_NUL_TERMINATED)
        return lw__errorf(s->err, LW_ERR_INVALID_ARG, "a system prompt length without a system prompt");

    /* memory that turns need whatever happens: the cache's ids, one checkpoint, the reply's piece buffer */
    s->cache = lw__calloc(&a, s->n_ctx ? s->n_ctx : 1, sizeof *s->cache);
    if (!s->cache || gen_buffers(s) != LW_OK || !grow(&a, (void **)&s->cps, &s->cap_cps, 1, sizeof *s->cps) ||
        !buf_reserve(&a, &s->kv_text, 0) || !buf_reserve(&a, &s->reply, 0))
        return lw__errorf(s->err, LW_ERR_NOMEM, "out of memory for a %u-cell session", s->n_ctx);

    /* the template: the given one, the model's, or the plain format */
    lw_chat_params_default(&s->tp);
    s->tp.enable_thinking = p.enable_thinking;
    const char *model_tmpl = NULL;
    lw_gguf *g = lw_model_gguf(s->m);
    if (g) lw_chat_from_gguf(g, &model_tmpl, &s->tp.bos_token, &s->tp.eos_token);
    lw_status st = LW_ERR_NOT_FOUND;
    if (p.template_src) {
        if (!(s->tmpl_copy = copy_bytes(s, p.template_src, strlen(p.template_src))))
            return lw__errorf(s->err, LW_ERR_NOMEM, "out of memory for the template");
        if ((st = parse_template(s, s->tmpl_copy)) == LW_OK) s->kind = LW_CHAT_TEMPLATE_GIVEN;
    } else if (model_tmpl) {
        if ((st = parse_template(s, model_tmpl)) == LW_OK) s->kind = LW_CHAT_TEMPLATE_MODEL;
    }
    if (st == LW_ERR_NOMEM) return lw__errorf(s->err, st, "out of memory parsing the chat template");
    if (st != LW_OK && !p.fallback)
        return st == LW_ERR_NOT_FOUND ? lw__errorf(s->err, st, "the model has no chat template")
                                      : lw__errorf(s->err, st, "the chat template does not parse: %s", s->why);
    if (st != LW_OK && (st = parse_template(s, plain_template)) != LW_OK)
        return lw__errorf(s->err, st, "the plain template: %s", s->why); /* only when memory runs out */

    if (p.tools && *p.tools) { /* a JSON array, checked now rather than at the first turn's render */
        const size_t n = strlen(p.tools);
        lw__json j;
        char jerr[LW_ERRMSG_SIZE];
        if ((st = lw__json_parse(p.tools, n, 0, &a, &j, jerr)) != LW_OK)
            return lw__errorf(s->err, st == LW_ERR_NOMEM ? st : LW_ERR_INVALID_ARG, "tools: %s", jerr);
        const int is_array = j.n[j.root].type == LW_JSON_ARR;
        lw__json_free(&a, &j);
        if (!is_array) return lw__errorf(s->err, LW_ERR_INVALID_ARG, "tools: not a JSON array");
        if (!(s->tools = copy_bytes(s, p.tools, n)))
            return lw__errorf(s->err, LW_ERR_NOMEM, "out of memory for the tools");
        s->tp.tools = s->tools;
    }
    if (p.system && !add_message(s, "system", p.system, p.system_len))
        return lw__errorf(s->err, LW_ERR_NOMEM, "out of memory for the system prompt");
    s->n_keep = s->n_msgs;
    forget_cache(s);
    return LW_OK;
}

lw_status lw_chat_session_new(lw_context *c, const lw_chat_session_params *params, lw_chat_session **out) {
    if (out) *out = NULL;
    if (!c || !out) return LW_ERR_INVALID_ARG;
    return session_new(lw_context_model(c), c, lw_context_n_ctx(c), params, out);
}

lw_status lw_chat_session_new_model(lw_model *m, uint32_t n_ctx, const lw_chat_session_params *params,
                                    lw_chat_session **out) {
    if (out) *out = NULL;
    if (!m || !out || n_ctx == 0) return LW_ERR_INVALID_ARG;
    return session_new(m, NULL, n_ctx, params, out);
}

void lw_chat_session_free(lw_chat_session *s) {
    if (!s) return;
    drop_messages(s, 0);
    lw__free(&s->alloc, s->msgs);
    lw__free(&s->alloc, s->cps);
    lw__free(&s->alloc, s->ids);
    lw__free(&s->alloc, s->cache);
    lw__free(&s->alloc, s->kv_text.p);
    lw__free(&s->alloc, s->reply.p);
    lw__free(&s->alloc, s->piece);
    lw__free(&s->alloc, s->gen_buf);
    lw__free(&s->alloc, s->stops);
    lw__free(&s->alloc, s->tmpl_copy);
    lw__free(&s->alloc, s->tools);
    lw_chat_template_free(s->tmpl);
    lw_allocator a = s->alloc;
    lw__free(&a, s);
}

const char *lw_chat_session_error(const lw_chat_session *s) {
    return s ? s->err : "NULL session";
}

lw_chat_template_kind lw_chat_session_template(const lw_chat_session *s, const char **why) {
    if (why) *why = s && s->kind == LW_CHAT_TEMPLATE_PLAIN ? s->why : "";
    return s ? s->kind : LW_CHAT_TEMPLATE_PLAIN;
}

/* ---------------------------------------------------------------------------------------------------------
 * Turns
 * ------------------------------------------------------------------------------------------------------- */

/* Undoes the last turn after a failure: its user message (and reply, if it joined the conversation) go, the
 * cache is cleared. Returns st. */
static lw_status fail_turn(lw_chat_session *s, lw_status st) {
    s->open = 0;
    s->pending = -1;
    s->turn.stop = LW_STOP_NONE;
    forget_cache(s);
    if (s->turn_first != SIZE_MAX && s->turn_first >= s->n_keep && s->turn_first < s->n_msgs)
        drop_messages(s, s->turn_first);
    s->turn_first = SIZE_MAX;
    return st;
}

void lw_chat_session_abort_turn(lw_chat_session *s) {
    if (s) fail_turn(s, LW_OK);
}

/* Ends the open reply with the machine's end step: the cache keeps the whole reply (a token sampled but not
 * decoded is decoded now when the machine asks, i.e. unless it ended generation, since the template writes
 * its own end of turn, or has no cell) and the reply joins the conversation. */
static lw_status finish_reply(lw_chat_session *s, const lw_gen_step *end, int *decode) {
    s->open = 0;
    s->turn.stop = end->stop;
    int keep = 1;
    if (s->pending >= 0 && end->stop != LW_STOP_EOG) {
        uint32_t at = s->n_cache;
        if (end->n_ids > 0 && at < s->n_ctx && (!s->c || lw_decode(s->c, &s->pending, 1, 0) == LW_OK)) {
            s->cache[at] = s->pending, s->n_cache = at + 1;
            if (!s->c && decode) *decode = 1; /* the caller's cache keeps it */
        } else {
            keep = 0; /* cannot hold it: the next turn starts over */
        }
    }
    s->pending = -1;
    if (keep && push_checkpoint(s, s->kv_text.len, s->past1) &&
        buf_append(&s->alloc, &s->kv_text, s->reply.p, s->reply.len)) {
    } else {
        forget_cache(s);
    }
    if (!add_message(s, "assistant", s->reply.p, s->reply.len))
        return fail_turn(s, lw__errorf(s->err, LW_ERR_NOMEM, "out of memory for a %zu-byte reply", s->reply.len));
    return LW_OK;
}

lw_status lw_chat_session_end_reply(lw_chat_session *s) {
    if (!s) return LW_ERR_INVALID_ARG;
    if (!s->open) return LW_OK;
    lw_gen_stop(&s->gen, LW_STOP_CALLBACK, &s->end);
    return finish_reply(s, &s->end, NULL);
}

lw_status lw_chat_session_set_limits(lw_chat_session *s, int32_t n_predict, const char *const *stop,
                                     const size_t *stop_len, size_t n_stop) {
    if (!s) return LW_ERR_INVALID_ARG;
    if (n_stop && !stop)
        return lw__errorf(s->err, LW_ERR_INVALID_ARG, "lw_chat_session_set_limits: NULL stop strings");
    lw_status st = lw_chat_session_end_reply(s);
    if (st != LW_OK) return st;
    /* one block: the pointers, the lengths, then the bytes of each string */
    size_t bytes = 0, head, total;
    for (size_t i = 0; i < n_stop; i++) {
        size_t n = !stop[i] ? 0 : stop_len ? stop_len[i] : strlen(stop[i]);
        if (!lw__add_size(bytes, n, &bytes) || !lw__add_size(bytes, 1, &bytes))
            return lw__errorf(s->err, LW_ERR_TOO_LARGE, "stop strings too long");
    }
    if (!lw__mul_size(n_stop, sizeof(char *) + sizeof(size_t), &head) || !lw__add_size(head, bytes, &total))
        return lw__errorf(s->err, LW_ERR_TOO_LARGE, "%zu stop strings", n_stop);
    char *block = n_stop ? lw__malloc(&s->alloc, total) : NULL;
    if (n_stop && !block)
        return lw__errorf(s->err, LW_ERR_NOMEM, "out of memory for %zu stop strings", n_stop);
    char **ptrs = (char **)(void *)block;
    size_t *lens = n_stop ? (size_t *)(void *)(block + n_stop * sizeof(char *)) : NULL;
    char *at = block + head;
    for (size_t i = 0; i < n_stop; i++) {
        size_t n = !stop[i] ? 0 : stop_len ? stop_len[i] : strlen(stop[i]);
        if (n) memcpy(at, stop[i], n);
        at[n] = 0;
        ptrs[i] = at, lens[i] = n;
        at += n + 1;
    }
    char **old_stops = s->stops;
    size_t *old_lens = s->stop_lens, old_n = s->n_stop;
    int32_t old_predict = s->n_predict;
    s->stops = ptrs, s->stop_lens = lens, s->n_stop = n_stop, s->n_predict = n_predict;
    if ((st = gen_buffers(s)) != LW_OK) { /* the previous limits stay */
        s->stops = old_stops, s->stop_lens = old_lens, s->n_stop = old_n, s->n_predict = old_predict;
        lw__free(&s->alloc, block);
        return lw__errorf(s->err, st, "out of memory for the stop strings' buffers");
    }
    lw__free(&s->alloc, old_stops);
    return LW_OK;
}

lw_status lw_chat_session_user(lw_chat_session *s, const char *msg, size_t len, lw_chat_turn *turn) {
    return lw_chat_session_send(s, "user", msg, len, turn);
}

lw_status lw_chat_session_send(lw_chat_session *s, const char *role, const char *msg, size_t len,
                               lw_chat_turn *turn) {
    if (!s) return LW_ERR_INVALID_ARG;
    if (msg && len == LW_CHAT_NUL_TERMINATED) len = strlen(msg);
    if (!msg && len) return lw__errorf(s->err, LW_ERR_INVALID_ARG, "lw_chat_session_send: NULL message");
    if (!role || !*role)
        return lw__errorf(s->err, LW_ERR_INVALID_ARG, "lw_chat_session_send: NULL or empty role");
    lw_status st = lw_chat_session_end_reply(s);
    if (st != LW_OK) return st;
    if (!add_message(s, role, msg ? msg : "", len))
        return lw__errorf(s->err, LW_ERR_NOMEM, "out of memory for a %zu-byte message", len);
    s->turn_first = s->n_msgs - 1;
    memset(&s->turn, 0, sizeof s->turn);

    /* which messages to render: all, or after a restart the kept ones and this one */
    size_t *idx = lw__calloc(&s->alloc, s->n_msgs, sizeof *idx), n_view = s->n_msgs;
    if (!idx) return fail_turn(s, lw__errorf(s->err, LW_ERR_NOMEM, "out of memory for %zu messages", s->n_msgs));
    for (size_t i = 0; i < n_view; i++) idx[i] = i;
    char *prompt = NULL;
    size_t prompt_len = 0;
    for (;;) {
        if ((st = render(s, idx, n_view, &prompt, &prompt_len)) != LW_OK) goto fail;
        /* resume from the last chunk boundary inside the part of the text that did not change */
        size_t same = 0;
        while (same < s->kv_text.len && same < prompt_len && s->kv_text.p[same] == prompt[same]) same++;
        if (same < s->kv_text.len) {
            size_t k = s->n_cps - 1;
            while (s->cps[k].text_off > same) k--;
            if (s->c) lw_context_set_n_past(s->c, s->cps[k].n_past);
            s->n_cache = s->cps[k].n_past;
            s->kv_text.len = s->cps[k].text_off;
            s->n_cps = k + 1;
            s->turn.resumed = 1;
            s->turn.resumed_at = s->cps[k].text_off;
        }
        size_t off = s->kv_text.len;
        if ((st = chunk_tokens(s, prompt + off, prompt_len - off, s->n_cache == 0)) != LW_OK) goto fail;
        /* room for the new part and at least one reply token */
        if ((uint64_t)s->n_cache + s->n_ids < s->n_ctx) break;
        lw_chat_string_free(s->tmpl, prompt);
        prompt = NULL;
        /* Full: start over from the system prompt and this message, if those fit (else refuse the message). */
        int fits = 0;
        if (!s->turn.restarted) {
            idx[s->n_keep] = s->n_msgs - 1;
            if ((st = render(s, idx, s->n_keep + 1, &prompt, &prompt_len)) != LW_OK) goto fail;
            st = chunk_tokens(s, prompt, prompt_len, 1);
            lw_chat_string_free(s->tmpl, prompt);
            prompt = NULL;
            if (st != LW_OK) goto fail;
            fits = (uint64_t)s->n_ids < s->n_ctx;
        }
        if (!fits) {
            st = lw__errorf(s->err, LW_ERR_TOO_LARGE, "the message does not fit the context (%zu tokens, %u cells)",
                            s->n_ids, s->n_ctx);
            goto fail;
        }
        n_view = s->n_keep + 1;
        forget_cache(s);
        s->turn.restarted = 1;
    }

    /* decode the new part; the memory to record it is made first so nothing fails after the decode */
    size_t off = s->kv_text.len;
    uint32_t past0 = s->n_cache;
    if (!buf_reserve(&s->alloc, &s->kv_text, prompt_len - off) ||
        !grow(&s->alloc, (void **)&s->cps, &s->cap_cps, s->n_cps + 1, sizeof *s->cps)) {
        st = lw__errorf(s->err, LW_ERR_NOMEM, "out of memory for a %zu-byte conversation", prompt_len);
        goto fail;
    }
    if (s->n_ids > INT32_MAX) {
        st = lw__errorf(s->err, LW_ERR_TOO_LARGE, "%zu prompt tokens", s->n_ids);
        goto fail;
    }
    if (s->c && s->n_ids > 0 && (st = lw_decode(s->c, s->ids, (int32_t)s->n_ids, 0)) != LW_OK) {
        lw__errorf(s->err, st, "decoding the message: %s", lw_context_error(s->c));
        forget_cache(s); /* the decode may have half run */
        goto fail;
    }
    memcpy(s->cache + past0, s->ids, s->n_ids * sizeof *s->ids);
    s->n_cache = past0 + (uint32_t)s->n_ids;
    push_checkpoint(s, off, past0);
    buf_append(&s->alloc, &s->kv_text, prompt + off, prompt_len - off);
    lw_chat_string_free(s->tmpl, prompt);
    lw__free(&s->alloc, idx);
    if (n_view < s->n_msgs) { /* the restart is final now: drop the messages between */
        cs_message last = s->msgs[s->n_msgs - 1];
        s->n_msgs--;
        drop_messages(s, s->n_keep);
        s->msgs[s->n_msgs++] = last;
    }
    s->turn_first = s->n_msgs - 1;

    /* the reply starts */
    s->open = 1;
    s->accepted = 0;
    s->pending = -1;
    s->past1 = s->n_cache;
    s->reply.len = 0;
    s->reply.p[0] = 0;
    lw_gen_params gp = gen_params(s);
    if (lw_gen_init(&s->gen, s->v, &gp, s->gen_buf, s->gen_cap) != LW_OK ||
        lw_gen_start(&s->gen, NULL, 0, s->n_cache, &s->end) != LW_OK) /* cannot fail: sized and fits */
        s->end = (lw_gen_step){.stop = LW_STOP_LENGTH};
    s->turn.n_prompt = (uint32_t)s->n_ids;
    s->turn.from_cell = past0;
    if (turn) *turn = s->turn;
    return LW_OK;
fail:
    lw_chat_string_free(s->tmpl, prompt);
    lw__free(&s->alloc, idx);
    drop_messages(s, s->n_msgs - 1);
    s->turn_first = SIZE_MAX;
    if (turn) *turn = s->turn;
    return st;
}

/* Takes sampled token id into the open reply through the generation machine: its text, the stop decision,
 * and the cache (a context decodes it on the next call or when the reply ends; an external decoder is told
 * through *decode). */
static lw_status take_token(lw_chat_session *s, int32_t id, int *decode, const char **piece, size_t *len) {
    s->turn.n_generated++;
    lw_gen_step *e = &s->end;
    lw_gen_push(&s->gen, id, e);
    /* the reply keeps the tokens' own text (what the cache holds), stop strings or not; an end-of-generation
     * token's text (with params.special) is handed on but stays out of the reply: the cache does not hold
     * that token and the template writes its own end of turn */
    const size_t own = e->stop == LW_STOP_EOG ? 0 : e->piece_len;
    if (!buf_reserve(&s->alloc, &s->reply, own + e->rest_len))
        return fail_turn(s, lw__errorf(s->err, LW_ERR_NOMEM, "out of memory for a %zu-byte reply",
                                       s->reply.len + own));
    buf_append(&s->alloc, &s->reply, e->piece, own);
    buf_append(&s->alloc, &s->reply, e->rest, e->rest_len);
    /* handed on: the text cut for stop strings, and at the end what was held back */
    memcpy(s->piece, e->text, e->text_len);
    memcpy(s->piece + e->text_len, e->tail, e->tail_len);
    const size_t n = e->text_len + e->tail_len;
    s->pending = id;
    if (!s->c && e->stop == LW_STOP_NONE) { /* the caller decodes it now */
        s->cache[s->n_cache++] = id;
        s->pending = -1;
        if (decode) *decode = 1;
    }
    lw_status st;
    if (e->stop != LW_STOP_NONE && (st = finish_reply(s, e, decode)) != LW_OK) return st;
    if (piece) *piece = s->piece;
    if (len) *len = n;
    return LW_OK;
}

lw_status lw_chat_session_next(lw_chat_session *s, lw_sampler *smp, int32_t *token, const char **piece,
                               size_t *len) {
    if (token) *token = -1;
    if (piece) *piece = "";
    if (len) *len = 0;
    if (!s) return LW_ERR_INVALID_ARG;
    if (!token) return lw__errorf(s->err, LW_ERR_INVALID_ARG, "lw_chat_session_next: NULL token");
    if (!s->c) return lw__errorf(s->err, LW_ERR_INVALID_ARG, "a session without a context: use lw_chat_session_push");
    if (!s->open) return LW_OK;
    if (!smp) return lw__errorf(s->err, LW_ERR_INVALID_ARG, "lw_chat_session_next: NULL sampler");
    if (!s->accepted) { /* the turn's prompt, for the sampler's penalties */
        for (size_t i = 0; i < s->n_ids; i++) lw_sampler_accept(smp, s->ids[i]);
        s->accepted = 1;
    }
    if (!s->end.sample) return finish_reply(s, &s->end, NULL); /* n_predict 0 */
    lw_status st;
    if (s->pending >= 0) {
        uint32_t at = s->n_cache;
        if ((st = lw_decode(s->c, &s->pending, 1, 0)) != LW_OK)
            return fail_turn(s, lw__errorf(s->err, st, "decoding the reply: %s", lw_context_error(s->c)));
        s->cache[at] = s->pending;
        s->n_cache = at + 1;
        s->pending = -1;
    }
    int32_t id = lw_sample(s->c, smp, -1);
    if (id < 0) return fail_turn(s, lw__errorf(s->err, LW_ERR_INVALID_ARG, "no logits to sample from"));
    if ((st = take_token(s, id, NULL, piece, len)) != LW_OK) return st;
    *token = id;
    return LW_OK;
}

lw_status lw_chat_session_push(lw_chat_session *s, int32_t id, int *decode, const char **piece, size_t *len) {
    if (decode) *decode = 0;
    if (piece) *piece = "";
    if (len) *len = 0;
    if (!s) return LW_ERR_INVALID_ARG;
    if (s->c) return lw__errorf(s->err, LW_ERR_INVALID_ARG, "a session with a context: use lw_chat_session_next");
    if (!s->open) return lw__errorf(s->err, LW_ERR_INVALID_ARG, "lw_chat_session_push: no reply is open");
    if (id < 0 || (uint32_t)id >= lw_vocab_n_tokens(s->v))
        return lw__errorf(s->err, LW_ERR_INVALID_ARG, "lw_chat_session_push: token %d outside the vocabulary", id);
    if (!s->end.sample) return finish_reply(s, &s->end, decode); /* n_predict 0 */
    return take_token(s, id, decode, piece, len);
}

const int32_t *lw_chat_session_prompt(const lw_chat_session *s, size_t *n) {
    if (n) *n = s && s->open ? s->n_ids : 0;
    return s ? s->ids : NULL;
}

const char *lw_chat_session_tail(const lw_chat_session *s, size_t *len) {
    const int ended = s && !s->open && s->end.stop == LW_STOP_CALLBACK;
    if (len) *len = ended ? s->end.tail_len : 0;
    return ended ? s->end.tail : "";
}

const char *lw_chat_session_reply(const lw_chat_session *s, size_t *len) {
    if (len) *len = s ? s->reply.len : 0;
    return s && s->reply.p ? s->reply.p : "";
}

const lw_chat_turn *lw_chat_session_turn(const lw_chat_session *s) {
    return s ? &s->turn : NULL;
}

/* ---------------------------------------------------------------------------------------------------------
 * The conversation
 * ------------------------------------------------------------------------------------------------------- */

lw_status lw_chat_session_add(lw_chat_session *s, const char *role, const char *content, size_t len) {
    if (!s) return LW_ERR_INVALID_ARG;
    if (content && len == LW_CHAT_NUL_TERMINATED) len = strlen(content);
    if (!role || !*role || (!content && len))
        return lw__errorf(s->err, LW_ERR_INVALID_ARG, "lw_chat_session_add: NULL or empty role, or NULL content");
    lw_status st = lw_chat_session_end_reply(s);
    if (st != LW_OK) return st;
    if (!add_message(s, role, content ? content : "", len))
        return lw__errorf(s->err, LW_ERR_NOMEM, "out of memory for a %zu-byte message", len);
    return LW_OK;
}

void lw_chat_session_reset(lw_chat_session *s) {
    if (!s) return;
    s->open = 0;
    s->pending = -1;
    drop_messages(s, s->n_keep);
    forget_cache(s);
    s->turn_first = SIZE_MAX;
    memset(&s->turn, 0, sizeof s->turn);
    s->reply.len = 0;
    if (s->reply.p) s->reply.p[0] = 0;
}

size_t lw_chat_session_n_messages(const lw_chat_session *s) {
    return s ? s->n_msgs : 0;
}

lw_status lw_chat_session_message(const lw_chat_session *s, size_t i, const char **role, const char **content,
                                  size_t *len) {
    if (!s || i >= s->n_msgs) return LW_ERR_INVALID_ARG;
    if (role) *role = s->msgs[i].role;
    if (content) *content = s->msgs[i].content;
    if (len) *len = s->msgs[i].len;
    return LW_OK;
}

const int32_t *lw_chat_session_tokens(const lw_chat_session *s, size_t *n) {
    if (n) *n = s ? s->n_cache : 0;
    return s ? s->cache : NULL;
}
