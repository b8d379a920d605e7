/* Chat templates: the API in chat.h — a parsed template object (AST in its own arena) and renders that
 * build the Hugging Face context (messages, add_generation_prompt, bos/eos tokens, tools (none unless given),
 * documents=none, optional enable_thinking) in a fresh, capped arena each time. */
#include "chat/chat.h"

#include "chat/jinja.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

struct lw_chat_template {
    lw_allocator alloc;         /* allocator for the object, arenas and outputs     */
    jj_arena arena;             /* tokens and AST                                   */
    jj_node **body;             /* top-level statements                             */
    uint32_t nbody;             /* their count                                      */
    lw_chat_error_kind kind;    /* kind of the last error                           */
    uint64_t last_steps;        /* steps used by the last render                    */
    char err[LW_ERRMSG_SIZE];   /* message of the last error                        */
};

void lw_chat_params_default(lw_chat_params *p) {
    memset(p, 0, sizeof *p);
    p->add_generation_prompt = 1;
    p->enable_thinking = -1;
    p->now = LW_CHAT_NOW_CURRENT;
}

static void copy_err(char *dst, size_t dst_size, const char *msg) {
    if (dst && dst_size) snprintf(dst, dst_size, "%s", msg);
}

lw_status lw_chat_template_parse(const char *src, size_t len, const lw_allocator *alloc, lw_chat_template **out,
                                 char *err, size_t err_size) {
    if (out) *out = NULL;
    if (!src || !out) {
        copy_err(err, err_size, "NULL argument");
        return LW_ERR_INVALID_ARG;
    }
    lw_allocator a = lw__allocator_or_default(alloc);
    lw_chat_template *t = lw__calloc(&a, 1, sizeof *t);
    if (!t) {
        copy_err(err, err_size, "out of memory");
        return LW_ERR_NOMEM;
    }
    t->alloc = a;
    /* tokens + AST take at most ~110 bytes per template byte (dense "{{a}}" runs); cap the arena so huge
     * inputs fail cleanly instead of exhausting memory */
    size_t cap = len > JJ_MAX_TEMPLATE_BYTES ? 0 : (len * 160 + (1u << 20));
    jj_arena_init(&t->arena, &t->alloc, cap);
    jj_arena tok_arena; /* the token array is only needed while parsing */
    jj_arena_init(&tok_arena, &t->alloc, cap);
    jj_tok *toks = NULL;
    size_t ntoks = 0;
    lw_status st = jj_lex(&t->arena, &tok_arena, src, len, &toks, &ntoks, t->err);
    if (st == LW_OK) st = jj_parse(&t->arena, toks, ntoks, &t->body, &t->nbody, t->err);
    jj_arena_free(&tok_arena);
    if (st != LW_OK) {
        copy_err(err, err_size, t->err);
        lw_chat_template_free(t);
        return st;
    }
    *out = t;
    return LW_OK;
}

const char *lw_chat_template_error(const lw_chat_template *t) {
    return t ? t->err : "NULL template";
}
lw_chat_error_kind lw_chat_template_error_kind(const lw_chat_template *t) {
    return t ? t->kind : LW_CHAT_ERR_RENDER;
}
uint64_t lw_chat_template_last_steps(const lw_chat_template *t) {
    return t ? t->last_steps : 0;
}

void lw_chat_string_free(lw_chat_template *t, char *s) {
    if (t && s) lw__free(&t->alloc, s);
}

void lw_chat_template_free(lw_chat_template *t) {
    if (!t) return;
    jj_arena_free(&t->arena);
    lw_allocator a = t->alloc;
    lw__free(&a, t);
}

static bool set_str(jj_ctx *c, jj_scope *g, const char *name, const char *value) {
    jj_str s;
    if (!jj_str_new(c, value ? value : "", value ? strlen(value) : 0, &s)) return false;
    return jj_scope_set(c, g, jj_s(name, strlen(name)), jj_strv(s));
}

/* The conversation of n messages as the template's `messages` list. */
static bool messages_list(jj_ctx *c, const lw_chat_message *msgs, size_t n, jj_val *out) {
    jj_list *l = jj_list_new(c, n);
    if (!l) return false;
    for (size_t i = 0; i < n; i++) {
        jj_dict *d = jj_dict_new(c, 2);
        jj_str role, content;
        if (!d) return false;
        const char *r = msgs[i].role ? msgs[i].role : "";
        if (!jj_str_new(c, r, strlen(r), &role) || !jj_dict_set(c, d, jj_strv(jj_s("role", 4)), jj_strv(role)))
            return false;
        jj_val cv = jj_none();
        if (msgs[i].content) {
            if (!jj_str_new(c, msgs[i].content, strlen(msgs[i].content), &content)) return false;
            cv = jj_strv(content);
        }
        if (!jj_dict_set(c, d, jj_strv(jj_s("content", 7)), cv) || !jj_list_push(c, l, jj_dictv(d))) return false;
    }
    *out = jj_listv(l);
    return true;
}

/* JSON text [0..n) of what (the caller's messages or tools) as a value; its parse errors are named after what. */
static bool json_arg(jj_ctx *c, const char *what, const char *text, size_t n, jj_val *out) {
    if (jj_from_json(c, jj_s(text, n), out)) return true;
    if (c->status == LW_ERR_INVALID_ARG) {
        char why[LW_ERRMSG_SIZE];
        snprintf(why, sizeof why, "%s", c->err);
        const char *m = strncmp(why, "from_json: ", 11) == 0 ? why + 11 : why;
        lw__errorf(c->err, LW_ERR_INVALID_ARG, "%s: bad JSON: %s", what, m);
    }
    return false;
}

/* The variables Hugging Face passes to chat templates (messages: the list already made). */
static bool build_globals(jj_ctx *c, jj_scope *g, jj_val messages, const lw_chat_params *p) {
    jj_val tools = jj_none();
    if (p->tools && p->tools[0]) {
        if (!json_arg(c, "tools", p->tools, strlen(p->tools), &tools)) return false;
        if (tools.t != JV_LIST) return jj_fail(c, LW_ERR_INVALID_ARG, "tools: not a JSON array");
    }
    if (!jj_scope_set(c, g, jj_s("messages", 8), messages) ||
        !jj_scope_set(c, g, jj_s("add_generation_prompt", 21), jj_bool(p->add_generation_prompt != 0)) ||
        !set_str(c, g, "bos_token", p->bos_token) || !set_str(c, g, "eos_token", p->eos_token) ||
        !jj_scope_set(c, g, jj_s("tools", 5), tools) || !jj_scope_set(c, g, jj_s("documents", 9), jj_none()))
        return false;
    if (p->enable_thinking >= 0 &&
        !jj_scope_set(c, g, jj_s("enable_thinking", 15), jj_bool(p->enable_thinking != 0)))
        return false;
    return true;
}

/* The messages of a render: n structs, or (json != NULL) a JSON array of message objects. */
typedef struct render_msgs {
    const lw_chat_message *msgs; /* the structs (json NULL)                                         */
    size_t n;                    /* their count, or the JSON's bytes                                */
    const char *json;            /* JSON text, or NULL                                              */
    bool nulls_empty;            /* JSON: "content": null made "" (the retry render() makes)        */
    int *n_nulls;                /* JSON: where to count the null contents seen (NULL: not counted) */
} render_msgs;

static bool build_messages(jj_ctx *c, const render_msgs *rm, jj_val *out) {
    if (!rm->json) return messages_list(c, rm->msgs, rm->n, out);
    if (!json_arg(c, "messages", rm->json, rm->n, out)) return false;
    if (out->t != JV_LIST) return jj_fail(c, LW_ERR_INVALID_ARG, "messages: not a JSON array");
    for (size_t i = 0; i < out->u.l->n; i++) {
        if (out->u.l->v[i].t != JV_DICT)
            return jj_fail(c, LW_ERR_INVALID_ARG, "messages[%zu]: not a JSON object", i);
        jj_val *content = jj_dict_get(c, out->u.l->v[i].u.d, jj_strv(jj_s("content", 7)));
        if (!content || content->t != JV_NONE) continue;
        if (rm->n_nulls) (*rm->n_nulls)++;
        if (rm->nulls_empty) *content = jj_strv(jj_s("", 0));
    }
    return true;
}

static lw_status render(lw_chat_template *t, const render_msgs *rm, const lw_chat_params *params, char **out,
                        size_t *out_len);

lw_status lw_chat_template_render(lw_chat_template *t, const lw_chat_message *msgs, size_t n,
                                  const lw_chat_params *params, char **out, size_t *out_len) {
    const render_msgs rm = {msgs, n, NULL, false, NULL};
    return render(t, n && !msgs ? NULL : &rm, params, out, out_len);
}

lw_status lw_chat_template_render_json(lw_chat_template *t, const char *messages, size_t len,
                                       const lw_chat_params *params, char **out, size_t *out_len) {
    int n_nulls = 0;
    render_msgs rm = {NULL, len, messages ? messages : "", false, &n_nulls};
    lw_status st = render(t, len && !messages ? NULL : &rm, params, out, out_len);
    /* OpenAI clients send an assistant turn that only calls tools with "content": null, which templates
     * that concatenate the content (Qwen3's: '...' + content) cannot render; as llama.cpp does for such
     * templates, the nulls become empty strings then (only then: templates that test `content is none`
     * keep seeing none) */
    if (st == LW_ERR_INVALID_ARG && n_nulls > 0 && t->kind == LW_CHAT_ERR_RENDER) {
        rm.nulls_empty = true;
        rm.n_nulls = NULL;
        st = render(t, &rm, params, out, out_len);
    }
    return st;
}

/* rm NULL: the caller's messages were a NULL pointer with a count. */
static lw_status render(lw_chat_template *t, const render_msgs *rm, const lw_chat_params *params, char **out,
                        size_t *out_len) {
    if (out) *out = NULL;
    if (out_len) *out_len = 0;
    if (!t || !out || !rm) {
        if (t) {
            t->kind = LW_CHAT_ERR_RENDER;
            lw__errorf(t->err, LW_ERR_INVALID_ARG, "NULL argument");
        }
        return LW_ERR_INVALID_ARG;
    }
    lw_chat_params p;
    if (params) p = *params;
    else lw_chat_params_default(&p);
    t->err[0] = 0;
    t->kind = LW_CHAT_OK;

    jj_arena arena;
    jj_arena_init(&arena, &t->alloc, p.max_memory ? p.max_memory : JJ_DEFAULT_MAX_MEMORY);
    jj_buf main_out = {0};
    jj_ctx c;
    memset(&c, 0, sizeof c);
    c.arena = &arena;
    c.out = c.main_out = &main_out;
    c.max_steps = p.max_steps ? p.max_steps : JJ_DEFAULT_MAX_STEPS;
    c.max_output = p.max_output ? p.max_output : JJ_DEFAULT_MAX_OUTPUT;
    c.now = p.now == LW_CHAT_NOW_CURRENT ? (int64_t)time(NULL) : p.now;
    c.err = t->err;

    jj_scope *g = jj_scope_new(&c, NULL);
    jj_val messages;
    bool ok = g && build_messages(&c, rm, &messages) && build_globals(&c, g, messages, &p) &&
              jj_render_body(&c, g, t->body, t->nbody);
    /* costs charged without an immediate check (lookups, searches) must not slip past the limit */
    if (ok && (c.status != LW_OK || !jj_step(&c, 0))) ok = false;
    t->last_steps = c.steps;
    lw_status st = LW_OK;
    if (ok) {
        char *s = lw__malloc(&t->alloc, main_out.n + 1);
        if (s) {
            if (main_out.n) memcpy(s, main_out.p, main_out.n);
            s[main_out.n] = 0;
            *out = s;
            if (out_len) *out_len = main_out.n;
        } else {
            jj_fail(&c, LW_ERR_NOMEM, "out of memory for the rendered prompt");
            ok = false;
        }
    }
    if (!ok) {
        st = c.status != LW_OK ? c.status : LW_ERR_INVALID_ARG;
        t->kind = c.raised ? LW_CHAT_ERR_RAISED
                  : st == LW_ERR_TOO_LARGE || st == LW_ERR_OVERFLOW ? LW_CHAT_ERR_LIMIT
                  : st == LW_ERR_NOMEM ? LW_CHAT_ERR_MEMORY
                                       : LW_CHAT_ERR_RENDER;
        if (!t->err[0]) lw__errorf(t->err, st, "template render failed");
    }
    jj_arena_free(&arena);
    return st;
}

/* The text of token `key`'s id, or NULL. */
static const char *token_text(lw_gguf *g, const char *key) {
    uint32_t id;
    lw_gguf_type type;
    uint64_t n;
    const void *data;
    if (lw_gguf_get_u32(g, key, &id) != LW_OK) return NULL;
    if (lw_gguf_get_arr(g, "tokenizer.ggml.tokens", &type, &n, &data) != LW_OK || type != LW_GGUF_STRING ||
        id >= n)
        return NULL;
    return ((const lw_gguf_str *)data)[id].s;
}

lw_status lw_chat_from_gguf(lw_gguf *g, const char **tmpl, const char **bos, const char **eos) {
    if (tmpl) *tmpl = NULL;
    if (bos) *bos = NULL;
    if (eos) *eos = NULL;
    if (!g) return LW_ERR_INVALID_ARG;
    if (bos) *bos = token_text(g, "tokenizer.ggml.bos_token_id");
    if (eos) *eos = token_text(g, "tokenizer.ggml.eos_token_id");
    const char *t = NULL;
    lw_status st = lw_gguf_get_str(g, "tokenizer.chat_template", &t);
    if (tmpl) *tmpl = st == LW_OK ? t : NULL;
    return st == LW_OK ? LW_OK : LW_ERR_NOT_FOUND;
}

lw_status lw_chat_apply(const char *tmpl, const lw_chat_message *msgs, size_t n, int add_generation_prompt,
                        const char *bos, const char *eos, const lw_allocator *alloc, char **out, size_t *out_len,
                        char *err, size_t err_size) {
    if (out) *out = NULL;
    if (!tmpl) {
        copy_err(err, err_size, "NULL template");
        return LW_ERR_INVALID_ARG;
    }
    lw_chat_template *t;
    lw_status st = lw_chat_template_parse(tmpl, strlen(tmpl), alloc, &t, err, err_size);
    if (st != LW_OK) return st;
    lw_chat_params p;
    lw_chat_params_default(&p);
    p.add_generation_prompt = add_generation_prompt;
    p.bos_token = bos;
    p.eos_token = eos;
    st = lw_chat_template_render(t, msgs, n, &p, out, out_len);
    if (st != LW_OK) copy_err(err, err_size, t->err);
    lw_chat_template_free(t);
    return st;
}
