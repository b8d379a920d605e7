/* lw_chat_session: conversations through the C API, checked against renderings and tokenizations computed
 * here through the public template and tokenizer API, and against fresh contexts.
 *
 *   - multi-turn: turn 1 decodes its whole rendering from cell 0; turn 2 decodes only the new part (the
 *     reply's end, the message, the assistant header) after turn 1's prompt and reply tokens, and the cache
 *     then holds exactly turn 1's prompt ids + the reply's ids + the new part's ids; a fresh context fed
 *     those ids at once generates the same greedy reply as the session's turn 2 (with a repetition penalty,
 *     so the sampler must have seen the turn's prompt tokens); a fresh session given the
 *     conversation at once decodes the whole rendering from cell 0
 *   - context full: the conversation starts over from the system prompt and the message (same reply as a
 *     fresh session with that conversation); a message too long even for that is refused (LW_ERR_TOO_LARGE)
 *     and the conversation and cache stay (the next turn reuses the cache)
 *   - NUL bytes: a message with a NUL is rendered and tokenized whole; a sampled reply with a NUL byte is
 * kept whole (reply, stored message) and the next turn still reuses the cache (the re-rendering matches)
 *   - external decoding (lw_chat_session_new_model, push): a caller-driven context ends every turn of a
 *     4-turn conversation with restarts and resumes exactly as a session with its own context
 *   - 300 random operations (messages of random bytes, some too long; reply tokens; ends; adds; aborts;
 *     resets) on both kinds of session: the same messages, replies and cache ids after every step
 *   - tools (lw_chat_session_params.tools): the template sees them (a turn decodes the rendering made here
 *     with lw_chat_params.tools); a tool's result answered with lw_chat_session_send(role "tool") decodes
 *     only the new part, whose rendering has the tool message; tools that are no JSON array are refused
 *   - bad arguments and templates: statuses with messages, no abort; allocation failures injected through
 *     the allocator at every call: LW_ERR_NOMEM (or success), the session stays usable, nothing leaks
 *
 * Models: a synth llama (byte vocabulary, ChatML template) written here (no shared data), and
 * ../shared/models/stories260K.gguf (no template: the plain format) when present. */
#include "llamaweb.h"
#include "synth/synth.h"
#include "test.h"

#include <stdint.h>
#include <sys/stat.h>

#define N_PREDICT 8 /* reply length cap of the multi-turn checks */
#define MAX_IDS 4096

static const char chatml[] = "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
                             "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}";

/* A reply collected from lw_chat_session_next. */
typedef struct reply {
    int32_t tok[1024];   /* sampled ids (the one that ended the reply included) */
    int n;               /* how many                                           */
    char text[16384];    /* the pieces, concatenated                           */
    size_t len;          /* bytes of text                                      */
    lw_stop_reason stop; /* why it ended                                       */
} reply;

/* A message of an expected rendering (content of len bytes). */
typedef struct msg {
    const char *role;    /* role            */
    const char *content; /* bytes           */
    size_t len;          /* content length  */
} msg;

static lw_context *make_context(lw_model *m, uint32_t n_ctx) {
    lw_context_params cp = lw_context_default_params();
    cp.n_ctx = n_ctx;
    cp.n_threads = 1;
    lw_context *c = NULL;
    CHECK_MSG(lw_context_create(m, &cp, &c) == LW_OK, "%s", c ? lw_context_error(c) : "no context");
    return c;
}

/* A sampler: temp <= 0 greedy; penalty != 1: a repetition penalty over the last 64 tokens seen. */
static lw_sampler *make_sampler(lw_model *m, float temp, uint64_t seed, float penalty) {
    lw_sampler_params sp = lw_sampler_default_params();
    sp.temp = temp;
    sp.seed = seed;
    sp.penalty_repeat = penalty;
    if (temp > 0) sp.top_k = 0, sp.top_p = 1, sp.min_p = 0;
    lw_sampler *s = NULL;
    CHECK(lw_sampler_create(lw_model_n_vocab(m), &sp, NULL, &s) == LW_OK);
    return s;
}

/* Generates the reply until it ends; the pieces must add up to the session's reply text. */
static lw_status gen_reply(lw_chat_session *cs, lw_sampler *s, reply *r) {
    int32_t t;
    const char *p;
    size_t n;
    lw_status st;
    r->n = 0, r->len = 0;
    while ((st = lw_chat_session_next(cs, s, &t, &p, &n)) == LW_OK && t >= 0) {
        if (r->n < 1024) r->tok[r->n++] = t;
        if (r->len + n <= sizeof r->text) memcpy(r->text + r->len, p, n);
        r->len += n;
    }
    size_t rl = 0;
    const char *rt = lw_chat_session_reply(cs, &rl);
    if (st == LW_OK) CHECK_MSG(rl == r->len && !memcmp(rt, r->text, rl), "reply %zu bytes, pieces %zu", rl, r->len);
    r->stop = lw_chat_session_turn(cs)->stop;
    return st;
}

/* The rendering of msgs with the generation prompt: the template t, or the plain format (documented in
 * include/llamaweb.h) written out here when t is NULL. Returns the length; out has room for cap bytes. */
static size_t render_expected(lw_chat_template *t, const lw_chat_params *tp, const msg *msgs, size_t n, char *out,
                              size_t cap) {
    size_t len = 0;
#define PUT(p, l)                                                                                            \
    do {                                                                                                     \
        if (len + (l) < cap) memcpy(out + len, (p), (l));                                                    \
        len += (l);                                                                                          \
    } while (0)
    if (!t) {
        for (size_t i = 0; i < n; i++) {
            const char *r = msgs[i].role;
            if (!strcmp(r, "user")) PUT("User: ", 6);
            if (!strcmp(r, "assistant")) PUT("Assistant:", 10);
            PUT(msgs[i].content, msgs[i].len);
            if (!strcmp(r, "system")) PUT("\n\n", 2);
            else PUT("\n", 1);
        }
        PUT("Assistant:", 10);
    } else {
        lw_chat_message v[16];
        for (size_t i = 0; i < n && i < 16; i++) {
            v[i] = (lw_chat_message){msgs[i].role, msgs[i].content};
            CHECK(strlen(msgs[i].content) == msgs[i].len); /* the template API takes C strings */
        }
        char *s = NULL;
        size_t l = 0;
        CHECK_MSG(lw_chat_template_render(t, v, n, tp, &s, &l) == LW_OK, "%s", lw_chat_template_error(t));
        if (s) PUT(s, l);
        lw_chat_string_free(t, s);
    }
#undef PUT
    CHECK(len < cap);
    if (len < cap) out[len] = 0;
    return len;
}

/* Token ids of a chunk as the session makes them: BOS first (when first and the vocabulary adds one), then
 * the text with control tokens parsed. Appends to ids[*n]. */
static void ref_tokens(lw_model *m, const char *text, size_t len, int first, int32_t *ids, size_t *n) {
    const lw_vocab *v = lw_model_vocab(m);
    if (first && lw_vocab_adds_bos(v)) ids[(*n)++] = lw_vocab_special(v, LW_TOKEN_BOS);
    size_t k = 0;
    CHECK_MSG(lw_model_tokenize(m, text, len, 0, 1, ids + *n, MAX_IDS - *n, &k) == LW_OK, "%s", lw_model_error(m));
    *n += k;
}

/* Whether the session's cache holds exactly ids[0..n). */
static int cache_is(lw_chat_session *cs, const int32_t *ids, size_t n) {
    size_t k = 0;
    const int32_t *t = lw_chat_session_tokens(cs, &k);
    return k == n && !memcmp(t, ids, n * sizeof *ids);
}

/* The model's template parsed here (NULL when it has none: the plain format) and its render options. */
static lw_chat_template *model_template(lw_model *m, lw_chat_params *tp) {
    const char *src = NULL;
    lw_chat_params_default(tp);
    tp->add_generation_prompt = 1;
    lw_chat_template *t = NULL;
    char why[256];
    if (lw_chat_from_gguf(lw_model_gguf(m), &src, &tp->bos_token, &tp->eos_token) == LW_OK && src)
        CHECK_MSG(lw_chat_template_parse(src, strlen(src), NULL, &t, why, sizeof why) == LW_OK, "%s", why);
    return t;
}

/* ---------------------------------------------------------------------------------------------------------
 * Tools: the template's `tools`, and a tool's result as a turn
 * ------------------------------------------------------------------------------------------------------- */

static void check_tools(lw_model *m) {
    static const char tmpl[] =
        "{% if tools %}<|im_start|>system\nTools:{% for t in tools %} {{ t.function.name }}{{ "
        "t.function.parameters "
        "| tojson }}{% endfor %}<|im_end|>\n{% endif %}{% for m in messages %}<|im_start|>{{ m.role }}\n"
        "{{ m.content }}<|im_end|>\n{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% "
        "endif %}";
    static const char tools[] =
        "[{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"parameters\": "
        "{\"type\": \"object\", \"properties\": {\"city\": {\"type\": \"string\"}}}}}]";
    static int32_t ids[MAX_IDS];
    static char p1[16384], p2[16384];
    static reply r1;
    const char *u = "Weather in Oslo?", *res = "{\"temp\": 21}";
    lw_chat_params tp;
    lw_chat_params_default(&tp);
    tp.add_generation_prompt = 1;
    tp.tools = tools;
    lw_chat_template *t = NULL;
    char why[256];
    CHECK_MSG(lw_chat_template_parse(tmpl, strlen(tmpl), NULL, &t, why, sizeof why) == LW_OK, "%s", why);
    lw_context *c = make_context(m, 512);
    lw_sampler *s = make_sampler(m, 0, 1, 1.0f);
    lw_chat_session_params sp = lw_chat_session_default_params();
    sp.template_src = tmpl;
    sp.tools = tools;
    sp.n_predict = N_PREDICT;
    lw_chat_session *cs = NULL;
    CHECK_MSG(lw_chat_session_new(c, &sp, &cs) == LW_OK, "%s", lw_chat_session_error(cs));
    if (!t || !c || !s || !cs) goto done;

    lw_chat_turn tr;
    CHECK_MSG(lw_chat_session_user(cs, u, strlen(u), &tr) == LW_OK, "%s", lw_chat_session_error(cs));
    msg conv[3] = {{"user", u, strlen(u)}};
    size_t l1 = render_expected(t, &tp, conv, 1, p1, sizeof p1), n1 = 0;
    CHECK_MSG(strstr(p1, "Tools: get_weather{\"type\": \"object\"") != NULL, "%s", p1);
    ref_tokens(m, p1, l1, 1, ids, &n1);
    CHECK_MSG(tr.from_cell == 0 && tr.n_prompt == n1 && cache_is(cs, ids, n1),
              "turn 1 with tools: %u tokens, want %zu", tr.n_prompt, n1);
    CHECK(gen_reply(cs, s, &r1) == LW_OK);

    /* the tool's result: a "tool" message, only the new part decoded */
    CHECK_MSG(lw_chat_session_send(cs, "tool", res, strlen(res), &tr) == LW_OK, "%s",
              lw_chat_session_error(cs));
    conv[1] = (msg){"assistant", r1.text, r1.len};
    conv[2] = (msg){"tool", res, strlen(res)};
    size_t l2 = render_expected(t, &tp, conv, 3, p2, sizeof p2), n2 = n1;
    CHECK(strstr(p2, "<|im_start|>tool\n{\"temp\": 21}<|im_end|>") != NULL);
    CHECK(l2 > l1 + r1.len && !memcmp(p2, p1, l1) && !memcmp(p2 + l1, r1.text, r1.len));
    const int kept = r1.stop == LW_STOP_EOG ? r1.n - 1 : r1.n;
    for (int i = 0; i < kept; i++) ids[n2++] = r1.tok[i];
    const size_t cell2 = n2;
    ref_tokens(m, p2 + l1 + r1.len, l2 - l1 - r1.len, 0, ids, &n2);
    CHECK_MSG(tr.from_cell == cell2 && tr.n_prompt == n2 - cell2 && cache_is(cs, ids, n2),
              "tool turn: %u tokens from %u, want %zu from %zu", tr.n_prompt, tr.from_cell, n2 - cell2,
              cell2);
    const char *role = NULL;
    CHECK(lw_chat_session_message(cs, 2, &role, NULL, NULL) == LW_OK && role && !strcmp(role, "tool"));
    CHECK(lw_chat_session_send(cs, "", "x", 1, NULL) == LW_ERR_INVALID_ARG);
    CHECK(lw_chat_session_send(cs, NULL, "x", 1, NULL) == LW_ERR_INVALID_ARG);

    /* tools that are not a JSON array: refused at creation, with a message */
    static const char *const bad[] = {"{\"type\": \"function\"}", "[{\"a\": 1", "tools"};
    for (int i = 0; i < 3; i++) {
        lw_chat_session *b = NULL;
        sp.tools = bad[i];
        CHECK(lw_chat_session_new(c, &sp, &b) == LW_ERR_INVALID_ARG);
        CHECK_MSG(b && strstr(lw_chat_session_error(b), "tools"), "%s",
                  b ? lw_chat_session_error(b) : "NULL");
        lw_chat_session_free(b);
    }
done:
    lw_chat_session_free(cs);
    lw_sampler_free(s);
    lw_context_free(c);
    lw_chat_template_free(t);
}

/* ---------------------------------------------------------------------------------------------------------
 * Multi-turn: cache reuse, and the same reply as a fresh context fed the conversation at once
 * ------------------------------------------------------------------------------------------------------- */

static void check_turns(lw_model *m, const char *label, const char *system) {
    static int32_t ids[MAX_IDS], t2[MAX_IDS], want[N_PREDICT];
    static char p1[16384], p2[16384];
    static reply r1, r2, rb;
    const char *u1 = "Hello there", *u2 = "What is 2+2?";
    printf("%s\n", label);
    lw_chat_params tp;
    lw_chat_template *t = model_template(m, &tp);
    lw_context *c = make_context(m, 512);
    lw_sampler *s = make_sampler(m, 0, 1, 1.5f); /* the penalty makes the sampler's record of the prompt count */
    lw_chat_session *cs = NULL;
    lw_chat_session_params sp = lw_chat_session_default_params();
    sp.system = system;
    sp.n_predict = N_PREDICT;
    CHECK_MSG(lw_chat_session_new(c, &sp, &cs) == LW_OK, "%s", lw_chat_session_error(cs));
    if (!c || !s || !cs) goto done;
    CHECK(lw_chat_session_template(cs, NULL) == (t ? LW_CHAT_TEMPLATE_MODEL : LW_CHAT_TEMPLATE_PLAIN));

    /* turn 1: the whole rendering from cell 0 */
    lw_chat_turn tr;
    CHECK_MSG(lw_chat_session_user(cs, u1, strlen(u1), &tr) == LW_OK, "%s", lw_chat_session_error(cs));
    msg conv[4] = {{"system", system, strlen(system)}, {"user", u1, strlen(u1)}};
    size_t l1 = render_expected(t, &tp, conv, 2, p1, sizeof p1), n1 = 0;
    ref_tokens(m, p1, l1, 1, ids, &n1);
    CHECK_MSG(tr.from_cell == 0 && tr.n_prompt == n1 && !tr.restarted && !tr.resumed, "turn 1: %u from %u, want %zu",
              tr.n_prompt, tr.from_cell, n1);
    CHECK(cache_is(cs, ids, n1));
    CHECK(gen_reply(cs, s, &r1) == LW_OK);
    CHECK(r1.n >= 1 && r1.n <= N_PREDICT && r1.stop != LW_STOP_NONE);
    const char *role, *content;
    size_t clen;
    CHECK(lw_chat_session_n_messages(cs) == 3);
    CHECK(lw_chat_session_message(cs, 2, &role, &content, &clen) == LW_OK && !strcmp(role, "assistant") &&
          clen == r1.len && !memcmp(content, r1.text, clen));

    /* turn 2: only the new part, after turn 1's prompt and reply tokens */
    CHECK_MSG(lw_chat_session_user(cs, u2, strlen(u2), &tr) == LW_OK, "%s", lw_chat_session_error(cs));
    conv[2] = (msg){"assistant", r1.text, r1.len};
    conv[3] = (msg){"user", u2, strlen(u2)};
    size_t l2 = render_expected(t, &tp, conv, 4, p2, sizeof p2);
    CHECK_MSG(l2 > l1 + r1.len && !memcmp(p2, p1, l1) && !memcmp(p2 + l1, r1.text, r1.len),
              "turn 2's rendering does not extend turn 1's and the reply");
    size_t n2 = n1, whole = 0;
    const int kept = r1.stop == LW_STOP_EOG ? r1.n - 1 : r1.n; /* an end-of-generation token is not decoded */
    for (int i = 0; i < kept; i++) ids[n2++] = r1.tok[i];
    const size_t cell2 = n2;
    ref_tokens(m, p2 + l1 + r1.len, l2 - l1 - r1.len, 0, ids, &n2);
    ref_tokens(m, p2, l2, 1, t2, &whole);
    printf("  turn 1: %u tokens from cell 0, reply %d tokens; turn 2: %u tokens from cell %u (the whole rendering: "
           "%zu tokens)\n",
           (unsigned)n1, r1.n, tr.n_prompt, tr.from_cell, whole);
    CHECK_MSG(tr.from_cell == cell2 && tr.n_prompt == n2 - cell2 && !tr.restarted && !tr.resumed,
              "turn 2: %u from %u, want %zu from %zu", tr.n_prompt, tr.from_cell, n2 - cell2, cell2);
    CHECK(tr.n_prompt < whole);
    CHECK(cache_is(cs, ids, n2));
    CHECK(gen_reply(cs, s, &r2) == LW_OK);

    /* A fresh context fed the cache's ids at once gives the same greedy reply, with a sampler that saw the
     * same tokens (the prompts and every sampled token, an end-of-generation one included). */
    lw_context *c2 = make_context(m, 512);
    lw_sampler *s2 = make_sampler(m, 0, 1, 1.5f);
    if (c2 && s2) {
        for (size_t i = 0; i < n1; i++) lw_sampler_accept(s2, ids[i]);
        for (int i = 0; i < r1.n; i++) lw_sampler_accept(s2, r1.tok[i]);
        for (size_t i = cell2; i < n2; i++) lw_sampler_accept(s2, ids[i]);
        CHECK(lw_decode(c2, ids, (int32_t)n2, 0) == LW_OK);
        int ng = 0;
        for (; ng < N_PREDICT; ng++) {
            want[ng] = lw_sample(c2, s2, -1);
            if (lw_vocab_is_eog(lw_model_vocab(m), want[ng])) {
                ng++;
                break;
            }
            if (ng + 1 < N_PREDICT) CHECK(lw_decode(c2, &want[ng], 1, 0) == LW_OK);
        }
        CHECK_MSG(ng == r2.n && !memcmp(want, r2.tok, (size_t)r2.n * sizeof *want),
                  "turn 2's reply differs from a fresh context's (%d vs %d tokens)", r2.n, ng);
    }
    lw_sampler_free(s2);
    lw_context_free(c2);

    /* a fresh session given the conversation at once decodes the whole rendering from cell 0 */
    lw_context *c3 = make_context(m, 512);
    lw_sampler *s3 = make_sampler(m, 0, 1, 1.5f);
    lw_chat_session *b = NULL;
    CHECK(c3 && lw_chat_session_new(c3, &sp, &b) == LW_OK);
    if (b && s3) {
        CHECK(lw_chat_session_add(b, "user", u1, strlen(u1)) == LW_OK);
        CHECK(lw_chat_session_add(b, "assistant", r1.text, r1.len) == LW_OK);
        CHECK(lw_chat_session_user(b, u2, strlen(u2), &tr) == LW_OK);
        CHECK_MSG(tr.from_cell == 0 && tr.n_prompt == whole, "fresh session: %u from %u", tr.n_prompt, tr.from_cell);
        CHECK(cache_is(b, t2, whole));
        CHECK(gen_reply(b, s3, &rb) == LW_OK);
        /* Not the live session's ids in general: its cache keeps the reply as the ids generated (a re-tokenized
         * reply may differ) and tokenizes each chunk alone (a SentencePiece vocabulary with add_space_prefix
         * puts a space at each chunk start); the equal-reply check above feeds the live session's ids. */
        printf("  a fresh session given the conversation: %zu ids from cell 0 (the live session: %zu)\n", whole, n2);
    }
    lw_chat_session_free(b);
    lw_sampler_free(s3);
    lw_context_free(c3);

    /* reset: back to the system prompt; with the sampler reseeded the first reply comes again */
    lw_chat_session_reset(cs);
    CHECK(lw_chat_session_n_messages(cs) == 1 && lw_context_n_past(c) == 0);
    lw_sampler_reset(s, 1);
    CHECK(lw_chat_session_user(cs, u1, strlen(u1), &tr) == LW_OK && tr.from_cell == 0 && tr.n_prompt == n1);
    CHECK(gen_reply(cs, s, &rb) == LW_OK);
    CHECK(rb.len == r1.len && !memcmp(rb.text, r1.text, r1.len));
done:
    lw_chat_session_free(cs);
    lw_sampler_free(s);
    lw_context_free(c);
    lw_chat_template_free(t);
}

/* ---------------------------------------------------------------------------------------------------------
 * External decoding (lw_chat_session_new_model + push): the caller's context, driven as the WebGPU model
 * would be, ends every turn exactly as a session with its own context
 * ------------------------------------------------------------------------------------------------------- */

/* want_restarts, want_resumes: at least that many turns must start over / resume at an earlier boundary. */
static void check_external(lw_model *m, const char *tmpl_src, int want_restarts, int want_resumes) {
    static reply ra, rb;
    static const char *msgs[] = {"Hello there", "What is 2+2?", "Tell me a story", "Thanks"};
    /* 240 cells: the third or fourth turn finds the context full and starts over */
    lw_context *ca = make_context(m, 240), *cb = make_context(m, 240);
    lw_sampler *sa = make_sampler(m, 0, 1, 1.5f), *sb = make_sampler(m, 0, 1, 1.5f);
    lw_chat_session_params sp = lw_chat_session_default_params();
    sp.system = "Be brief.";
    sp.n_predict = 24;
    sp.template_src = tmpl_src;
    lw_chat_session *a = NULL, *b = NULL;
    CHECK(ca && lw_chat_session_new(ca, &sp, &a) == LW_OK);
    CHECK(lw_chat_session_new_model(m, 240, &sp, &b) == LW_OK);
    if (!a || !b || !cb || !sa || !sb) goto done;
    int32_t tok = 0;
    int dec = 0, restarts = 0, resumes = 0;
    CHECK(lw_chat_session_push(b, 5, &dec, NULL, NULL) == LW_ERR_INVALID_ARG && dec == 0); /* no reply open */
    CHECK(lw_chat_session_push(a, 5, &dec, NULL, NULL) == LW_ERR_INVALID_ARG);            /* has a context */
    for (int t = 0; t < 4; t++) {
        lw_chat_turn ta, tb;
        CHECK(lw_chat_session_user(a, msgs[t], strlen(msgs[t]), &ta) == LW_OK);
        CHECK(lw_chat_session_user(b, msgs[t], strlen(msgs[t]), &tb) == LW_OK);
        CHECK(lw_chat_session_next(b, sb, &tok, NULL, NULL) == LW_ERR_INVALID_ARG); /* no context */
        /* the caller: its cache to from_cell, the prompt ids decoded there, recorded for the penalties */
        size_t n = 0;
        const int32_t *ids = lw_chat_session_prompt(b, &n);
        CHECK(n == tb.n_prompt && lw_context_set_n_past(cb, tb.from_cell) == LW_OK);
        CHECK(lw_decode(cb, ids, (int32_t)n, 0) == LW_OK);
        for (size_t i = 0; i < n; i++) lw_sampler_accept(sb, ids[i]);
        CHECK(gen_reply(a, sa, &ra) == LW_OK);
        rb.n = 0, rb.len = 0;
        while (lw_chat_session_turn(b)->stop == LW_STOP_NONE && rb.n < 1024) {
            const char *p;
            size_t pl;
            int32_t id = lw_sample(cb, sb, -1);
            CHECK(lw_chat_session_push(b, id, &dec, &p, &pl) == LW_OK);
            rb.tok[rb.n++] = id;
            if (rb.len + pl <= sizeof rb.text) memcpy(rb.text + rb.len, p, pl);
            rb.len += pl;
            if (dec) CHECK(lw_decode(cb, &id, 1, 0) == LW_OK);
        }
        CHECK_MSG(ta.n_prompt == tb.n_prompt && ta.from_cell == tb.from_cell && ta.restarted == tb.restarted &&
                      ta.resumed == tb.resumed,
                  "turn %d: %u from %u (restart %d, resume %d) vs external %u from %u (%d, %d)", t, ta.n_prompt,
                  ta.from_cell, ta.restarted, ta.resumed, tb.n_prompt, tb.from_cell, tb.restarted, tb.resumed);
        CHECK_MSG(ra.n == rb.n && !memcmp(ra.tok, rb.tok, (size_t)ra.n * sizeof *ra.tok) && ra.len == rb.len &&
                      !memcmp(ra.text, rb.text, ra.len),
                  "turn %d: reply %d tokens vs external %d", t, ra.n, rb.n);
        CHECK(lw_chat_session_turn(a)->stop == lw_chat_session_turn(b)->stop);
        size_t na = 0, nb = 0;
        const int32_t *ta_ids = lw_chat_session_tokens(a, &na), *tb_ids = lw_chat_session_tokens(b, &nb);
        CHECK(na == nb && na == lw_context_n_past(ca) && nb == lw_context_n_past(cb) &&
              !memcmp(ta_ids, tb_ids, na * sizeof *ta_ids));
        restarts += ta.restarted, resumes += ta.resumed;
    }
    printf("external decoding: 4 turns as a session with a context (%d restarts, %d resumes)\n", restarts, resumes);
    CHECK(restarts >= want_restarts && resumes >= want_resumes);
    /* a failed decode on the caller's side: the turn is undone, the next one decodes everything */
    size_t before = lw_chat_session_n_messages(b);
    lw_chat_turn tb;
    CHECK(lw_chat_session_user(b, "x", 1, &tb) == LW_OK);
    lw_chat_session_abort_turn(b);
    size_t nb = 1;
    lw_chat_session_tokens(b, &nb);
    /* (a turn that started over keeps only the system prompt: the dropped messages do not come back) */
    CHECK(lw_chat_session_n_messages(b) == (tb.restarted ? 1 : before) && nb == 0);
    CHECK(lw_chat_session_user(b, "y", 1, &tb) == LW_OK && tb.from_cell == 0);
    CHECK(lw_chat_session_push(b, -1, &dec, NULL, NULL) == LW_ERR_INVALID_ARG);
    CHECK(lw_chat_session_push(b, lw_model_n_vocab(m), &dec, NULL, NULL) == LW_ERR_INVALID_ARG);
done:
    lw_chat_session_free(a);
    lw_chat_session_free(b);
    lw_sampler_free(sa);
    lw_sampler_free(sb);
    lw_context_free(ca);
    lw_context_free(cb);
}

/* Pushed tokens (the byte vocabulary: byte b is id 3 + b, </s> is 2, an end of generation): "ok" then </s>.
 * With special the end token's text comes as its piece but stays out of the reply and of the cache. */
static void check_push_eog(lw_model *m) {
    for (int special = 0; special < 2; special++) {
        lw_chat_session_params sp = lw_chat_session_default_params();
        sp.special = special;
        lw_chat_session *b = NULL;
        CHECK(lw_chat_session_new_model(m, 256, &sp, &b) == LW_OK);
        if (!b) return;
        lw_chat_turn tr;
        CHECK(lw_chat_session_user(b, "hi", 2, &tr) == LW_OK && tr.from_cell == 0);
        const int32_t push[3] = {3 + 'o', 3 + 'k', 2};
        const char *want[3] = {"o", "k", special ? "</s>" : ""};
        for (int i = 0; i < 3; i++) {
            int dec = -1;
            const char *p = NULL;
            size_t n = 0;
            CHECK(lw_chat_session_push(b, push[i], &dec, &p, &n) == LW_OK);
            CHECK_MSG(n == strlen(want[i]) && !memcmp(p, want[i], n) && dec == (i < 2),
                      "special %d, token %d: piece '%.*s', decode %d", special, push[i], (int)n, p, dec);
        }
        size_t rl = 0, nt = 0, cl = 0;
        const char *r = lw_chat_session_reply(b, &rl), *role, *content;
        const int32_t *ids = lw_chat_session_tokens(b, &nt);
        CHECK(lw_chat_session_turn(b)->stop == LW_STOP_EOG && lw_chat_session_turn(b)->n_generated == 3);
        CHECK(rl == 2 && !memcmp(r, "ok", 2));
        CHECK(lw_chat_session_message(b, 1, &role, &content, &cl) == LW_OK && cl == 2 && !memcmp(content, "ok", 2));
        CHECK(nt == tr.n_prompt + 2 && ids[nt - 2] == push[0] && ids[nt - 1] == push[1]);
        /* the next turn goes on after "ok" */
        CHECK(lw_chat_session_user(b, "x", 1, &tr) == LW_OK && tr.from_cell == nt && !tr.resumed);
        lw_chat_session_free(b);
    }
}

/* ---------------------------------------------------------------------------------------------------------
 * Random operations: a session with a context and an external one driven alike must agree after every step
 * ------------------------------------------------------------------------------------------------------- */

static uint64_t rnd(uint64_t *x) {
    *x ^= *x << 13, *x ^= *x >> 7, *x ^= *x << 17;
    return *x;
}

/* One reply step of the external session b over the caller's context cb. Returns 1 while the reply goes on. */
static int external_step(lw_chat_session *b, lw_context *cb, lw_sampler *sb) {
    if (lw_chat_session_turn(b)->stop != LW_STOP_NONE) return 0;
    int32_t id = lw_sample(cb, sb, -1);
    int dec = 0;
    lw_status st = lw_chat_session_push(b, id, &dec, NULL, NULL);
    if (st != LW_OK) return 0; /* no reply open */
    if (dec) CHECK(lw_decode(cb, &id, 1, 0) == LW_OK);
    return lw_chat_session_turn(b)->stop == LW_STOP_NONE;
}

static void check_random(lw_model *m) {
    lw_context *ca = make_context(m, 256), *cb = make_context(m, 256);
    lw_sampler *sa = make_sampler(m, 0, 1, 1), *sb = make_sampler(m, 0, 1, 1);
    lw_chat_session_params sp = lw_chat_session_default_params();
    sp.system = "Sys\0tem";
    sp.system_len = 7;
    sp.n_predict = 5;
    lw_chat_session *a = NULL, *b = NULL;
    CHECK(ca && lw_chat_session_new(ca, &sp, &a) == LW_OK);
    CHECK(lw_chat_session_new_model(m, 256, &sp, &b) == LW_OK);
    if (!a || !b || !cb || !sa || !sb) goto done;
    uint64_t x = 0x9e3779b97f4a7c15ull;
    int counts[7] = {0}, refused = 0, open_b = 0, resets = 0, restarts = 0, reuses = 0;
    char text[400];
    for (int step = 0; step < 300; step++) {
        int op = (int)(rnd(&x) % 7);
        counts[op]++;
        if (op <= 1) { /* a user message: random bytes (NUL included), now and then too long */
            size_t n = rnd(&x) % 8 == 0 ? 300 + rnd(&x) % 100 : rnd(&x) % 24;
            for (size_t i = 0; i < n; i++) text[i] = (char)(rnd(&x) % 4 == 0 ? rnd(&x) % 256 : 'a' + rnd(&x) % 26);
            lw_chat_turn ta, tb;
            lw_status st = lw_chat_session_user(a, text, n, &ta), sb_st = lw_chat_session_user(b, text, n, &tb);
            CHECK_MSG(st == sb_st && (st == LW_OK || st == LW_ERR_TOO_LARGE), "step %d: %s / %s", step,
                      lw_status_str(st), lw_status_str(sb_st));
            refused += st == LW_ERR_TOO_LARGE;
            open_b = sb_st == LW_OK;
            if (open_b) {
                size_t k = 0;
                const int32_t *ids = lw_chat_session_prompt(b, &k);
                CHECK(lw_context_set_n_past(cb, tb.from_cell) == LW_OK && lw_decode(cb, ids, (int32_t)k, 0) == LW_OK);
                CHECK(ta.from_cell == tb.from_cell && ta.n_prompt == tb.n_prompt);
                restarts += ta.restarted, reuses += ta.from_cell > 0;
            }
        } else if (op == 2 || op == 3) { /* a few reply tokens */
            int k = 1 + (int)(rnd(&x) % 4);
            for (int i = 0; i < k; i++) {
                int32_t tok;
                CHECK(lw_chat_session_next(a, sa, &tok, NULL, NULL) == LW_OK);
                if (open_b) open_b = external_step(b, cb, sb);
            }
        } else if (op == 4) {
            CHECK(lw_chat_session_end_reply(a) == LW_OK && lw_chat_session_end_reply(b) == LW_OK);
            open_b = 0;
        } else if (op == 5) {
            if (rnd(&x) % 2) {
                CHECK(lw_chat_session_add(a, "assistant", "ok\0k", 4) == LW_OK);
                CHECK(lw_chat_session_add(b, "assistant", "ok\0k", 4) == LW_OK);
            } else {
                lw_chat_session_abort_turn(a);
                lw_chat_session_abort_turn(b);
            }
            open_b = 0;
        } else if (rnd(&x) % 4 == 0) { /* now and then: start over */
            resets++;
            lw_chat_session_reset(a);
            lw_chat_session_reset(b);
            open_b = 0;
        }
        /* The same conversation, the same cache (while a reply goes on, the session with a context holds its
         * last token undecoded until the next step, the external caller decoded it at once; the caller's own
         * cache may hold more: it is cut to from_cell at the next turn). */
        size_t na = 0, nb = 0, ra = 0, rb = 0;
        const int32_t *ia = lw_chat_session_tokens(a, &na), *ib = lw_chat_session_tokens(b, &nb);
        const char *ta = lw_chat_session_reply(a, &ra), *tb = lw_chat_session_reply(b, &rb);
        const int going = lw_chat_session_turn(a)->stop == LW_STOP_NONE;
        CHECK_MSG(na == lw_context_n_past(ca) && nb <= lw_context_n_past(cb) && (nb == na || (going && nb == na + 1)) &&
                      !memcmp(ia, ib, na * sizeof *ia),
                  "step %d (op %d): %zu / %zu ids", step, op, na, nb);
        CHECK_MSG(ra == rb && !memcmp(ta, tb, ra), "step %d: replies differ", step);
        CHECK(lw_chat_session_n_messages(a) == lw_chat_session_n_messages(b) && lw_chat_session_n_messages(a) >= 1);
        for (size_t i = 0; i < lw_chat_session_n_messages(a); i++) {
            const char *c1, *c2, *r1, *r2;
            size_t l1, l2;
            lw_chat_session_message(a, i, &r1, &c1, &l1);
            lw_chat_session_message(b, i, &r2, &c2, &l2);
            CHECK(!strcmp(r1, r2) && l1 == l2 && !memcmp(c1, c2, l1));
        }
    }
    printf("random operations: 300 steps (user %d: %d refused, %d restarts, %d from a kept cache; reply tokens %d, "
           "end %d, add/abort %d, reset %d), both sessions alike\n",
           counts[0] + counts[1], refused, restarts, reuses, counts[2] + counts[3], counts[4], counts[5], resets);
    CHECK(refused > 0 && restarts > 0 && reuses > 0);
done:
    lw_chat_session_free(a);
    lw_chat_session_free(b);
    lw_sampler_free(sa);
    lw_sampler_free(sb);
    lw_context_free(ca);
    lw_context_free(cb);
}

/* ---------------------------------------------------------------------------------------------------------
 * A full context: restart from the system prompt; a message too long even for that is refused
 * ------------------------------------------------------------------------------------------------------- */

static void check_full(lw_model *m) {
    static int32_t ids[MAX_IDS];
    static char p[16384], big[4096];
    static reply r1, r2, rf, r3;
    const char *system = "Be brief.", *u1 = "Hello there", *u2 = "What is 2+2?";
    lw_chat_params tp;
    lw_chat_template *t = model_template(m, &tp);
    msg conv[2] = {{"system", system, strlen(system)}, {"user", u2, strlen(u2)}};
    size_t l = render_expected(t, &tp, conv, 2, p, sizeof p), n = 0;
    ref_tokens(m, p, l, 1, ids, &n);
    /* room for [system, u2] and a reply, not for turn 1 + turn 2 */
    const uint32_t n_ctx = (uint32_t)n + N_PREDICT + 4;
    printf("full context: %u cells, [system, message 2] %zu tokens\n", n_ctx, n);
    lw_context *c = make_context(m, n_ctx), *cf = make_context(m, n_ctx);
    lw_sampler *s = make_sampler(m, 0, 1, 1), *sf = make_sampler(m, 0, 1, 1);
    lw_chat_session_params sp = lw_chat_session_default_params();
    sp.system = system;
    sp.n_predict = N_PREDICT;
    lw_chat_session *cs = NULL, *fresh = NULL;
    CHECK(c && lw_chat_session_new(c, &sp, &cs) == LW_OK);
    CHECK(cf && lw_chat_session_new(cf, &sp, &fresh) == LW_OK);
    if (!cs || !fresh || !s || !sf) goto done;
    lw_chat_turn tr;
    CHECK(lw_chat_session_user(cs, u1, strlen(u1), &tr) == LW_OK && !tr.restarted);
    CHECK(gen_reply(cs, s, &r1) == LW_OK);
    CHECK_MSG(lw_chat_session_user(cs, u2, strlen(u2), &tr) == LW_OK, "%s", lw_chat_session_error(cs));
    CHECK_MSG(tr.restarted && tr.from_cell == 0 && tr.n_prompt == n, "restart: %d, %u from %u", tr.restarted,
              tr.n_prompt, tr.from_cell);
    CHECK(cache_is(cs, ids, n));
    CHECK(gen_reply(cs, s, &r2) == LW_OK);
    /* the conversation is [system, u2, reply]; the reply is a fresh session's for that conversation */
    const char *role, *content;
    size_t clen;
    CHECK(lw_chat_session_n_messages(cs) == 3);
    CHECK(lw_chat_session_message(cs, 1, &role, &content, &clen) == LW_OK && !strcmp(role, "user") &&
          clen == strlen(u2) && !memcmp(content, u2, clen));
    CHECK(lw_chat_session_user(fresh, u2, strlen(u2), &tr) == LW_OK && tr.from_cell == 0 && tr.n_prompt == n);
    CHECK(gen_reply(fresh, sf, &rf) == LW_OK);
    CHECK(rf.n == r2.n && !memcmp(rf.tok, r2.tok, (size_t)r2.n * sizeof *rf.tok));

    /* a message longer than the context: refused, the conversation and the cache kept */
    for (size_t i = 0; i < sizeof big; i++) big[i] = (char)('a' + i % 26);
    const uint32_t past = lw_context_n_past(c);
    size_t kept_n = 0;
    const int32_t *kept = lw_chat_session_tokens(cs, &kept_n);
    CHECK(kept_n == past);
    CHECK(lw_chat_session_user(cs, big, sizeof big, &tr) == LW_ERR_TOO_LARGE);
    CHECK_MSG(strstr(lw_chat_session_error(cs), "does not fit the context") != NULL, "%s", lw_chat_session_error(cs));
    CHECK(lw_chat_session_n_messages(cs) == 3 && lw_context_n_past(c) == past);
    CHECK(lw_chat_session_tokens(cs, &kept_n) == kept && kept_n == past);
    int32_t tok = 0;
    CHECK(lw_chat_session_next(cs, s, &tok, NULL, NULL) == LW_OK && tok == -1); /* no reply is open */
    /* and the next turn goes on from the cache (or restarts, if the context is full again) */
    CHECK(lw_chat_session_user(cs, "ok", 2, &tr) == LW_OK);
    CHECK_MSG(tr.restarted || tr.from_cell == past, "after the refusal: from cell %u, %u cells before", tr.from_cell,
              past);
    CHECK(gen_reply(cs, s, &r3) == LW_OK);
done:
    lw_chat_session_free(cs);
    lw_chat_session_free(fresh);
    lw_sampler_free(s);
    lw_sampler_free(sf);
    lw_context_free(c);
    lw_context_free(cf);
    lw_chat_template_free(t);
}

/* ---------------------------------------------------------------------------------------------------------
 * NUL bytes in a message and in a reply
 * ------------------------------------------------------------------------------------------------------- */

static void check_nul(lw_model *m) {
    static int32_t ids[MAX_IDS];
    static char p[4096];
    static reply r;
    lw_context *c = make_context(m, 1024);
    lw_chat_session_params sp = lw_chat_session_default_params();
    sp.system = "Be\0brief.";
    sp.system_len = 9;
    sp.n_predict = 64;
    lw_chat_session *cs = NULL;
    CHECK(c && lw_chat_session_new(c, &sp, &cs) == LW_OK);
    if (!cs) {
        lw_context_free(c);
        return;
    }
    /* a message with NUL bytes: rendered and tokenized whole (the rendering written out here for ChatML) */
    static const char u[] = "ab\0cd\0";
    lw_chat_turn tr;
    CHECK(lw_chat_session_user(cs, u, sizeof u - 1, &tr) == LW_OK);
    static const char want[] = "<|im_start|>system\nBe\0brief.<|im_end|>\n<|im_start|>user\nab\0cd\0<|im_end|>\n"
                               "<|im_start|>assistant\n";
    size_t n = 0;
    ref_tokens(m, want, sizeof want - 1, 1, ids, &n);
    CHECK_MSG(tr.n_prompt == n && cache_is(cs, ids, n), "NUL message: %u tokens, want %zu", tr.n_prompt, n);
    const char *role, *content;
    size_t clen;
    CHECK(lw_chat_session_message(cs, 0, &role, &content, &clen) == LW_OK && clen == 9 && !memcmp(content, "Be\0brief.", 9));
    CHECK(lw_chat_session_message(cs, 1, &role, &content, &clen) == LW_OK && clen == 6 && !memcmp(content, u, 6));
    (void)p;

    /* a reply with a NUL byte: sampled replies (high temperature over the byte vocabulary) until one has it */
    lw_sampler_params spp = lw_sampler_default_params();
    spp.temp = 50, spp.top_k = 0, spp.top_p = 1, spp.min_p = 0;
    int found = 0;
    for (uint64_t seed = 1; seed <= 40 && !found; seed++) {
        spp.seed = seed;
        lw_sampler *s = NULL;
        CHECK(lw_sampler_create(lw_model_n_vocab(m), &spp, NULL, &s) == LW_OK);
        if (!s) break;
        lw_chat_session_reset(cs);
        CHECK(lw_chat_session_user(cs, "hi", 2, &tr) == LW_OK);
        CHECK(gen_reply(cs, s, &r) == LW_OK);
        const char *nul = r.len <= sizeof r.text ? memchr(r.text, 0, r.len) : NULL;
        if (nul && nul < r.text + r.len - 1) { /* a NUL inside the reply, not only at its end */
            found = 1;
            printf("NUL reply: seed %llu, %d tokens, %zu bytes, NUL at byte %zu\n", (unsigned long long)seed, r.n,
                   r.len, (size_t)(nul - r.text));
            CHECK(lw_chat_session_message(cs, 2, &role, &content, &clen) == LW_OK && !strcmp(role, "assistant") &&
                  clen == r.len && !memcmp(content, r.text, r.len));
            /* the next turn's rendering holds the reply whole, so the cache is reused up to its end */
            const uint32_t past = lw_context_n_past(c);
            CHECK(lw_chat_session_user(cs, "ok", 2, &tr) == LW_OK);
            CHECK_MSG(!tr.resumed && !tr.restarted && tr.from_cell == past, "after a NUL reply: from cell %u of %u%s",
                      tr.from_cell, past, tr.resumed ? " (resumed earlier)" : "");
        }
        lw_sampler_free(s);
    }
    CHECK_MSG(found, "no sampled reply had a NUL byte (pick other seeds)");
    lw_chat_session_free(cs);
    lw_context_free(c);
}

/* ---------------------------------------------------------------------------------------------------------
 * Bad arguments and templates
 * ------------------------------------------------------------------------------------------------------- */

static void check_errors(lw_model *m, const char *model_path) {
    lw_context *c = make_context(m, 256);
    lw_sampler *s = make_sampler(m, 0, 1, 1);
    lw_chat_session *cs = NULL;
    lw_chat_session_params sp = lw_chat_session_default_params();
    CHECK(lw_chat_session_new(NULL, &sp, &cs) == LW_ERR_INVALID_ARG && cs == NULL);
    CHECK(lw_chat_session_new(c, &sp, NULL) == LW_ERR_INVALID_ARG);
    CHECK(lw_chat_session_user(NULL, "x", 1, NULL) == LW_ERR_INVALID_ARG);
    CHECK(lw_chat_session_next(NULL, s, &(int32_t){0}, NULL, NULL) == LW_ERR_INVALID_ARG);
    CHECK(lw_chat_session_add(NULL, "user", "x", 1) == LW_ERR_INVALID_ARG);
    CHECK(lw_chat_session_end_reply(NULL) == LW_ERR_INVALID_ARG);
    CHECK(lw_chat_session_message(NULL, 0, NULL, NULL, NULL) == LW_ERR_INVALID_ARG);
    CHECK(lw_chat_session_n_messages(NULL) == 0 && *lw_chat_session_error(NULL));
    lw_chat_session_reset(NULL);
    lw_chat_session_free(NULL);

    /* a system prompt length without the prompt */
    sp.system_len = 3;
    CHECK(lw_chat_session_new(c, &sp, &cs) == LW_ERR_INVALID_ARG && cs && *lw_chat_session_error(cs));
    lw_chat_session_free(cs);
    sp = lw_chat_session_default_params();

    /* a template that does not parse: the plain format, or an error without fallback */
    sp.template_src = "{% for m in messages %}{{ m.content }}";
    CHECK(lw_chat_session_new(c, &sp, &cs) == LW_OK);
    const char *why = NULL;
    CHECK(lw_chat_session_template(cs, &why) == LW_CHAT_TEMPLATE_PLAIN && why && *why);
    lw_chat_session_free(cs);
    sp.fallback = 0;
    CHECK(lw_chat_session_new(c, &sp, &cs) == LW_ERR_INVALID_ARG && cs);
    CHECK_MSG(strstr(lw_chat_session_error(cs), "does not parse") != NULL, "%s", lw_chat_session_error(cs));
    lw_chat_session_free(cs);

    /* A template that raises for one message and renders every reply as "[reply]": the message is refused with
     * the template's text and the conversation stays; the next turn finds the reply re-rendered differently
     * and resumes from the checkpoint where the reply started. */
    sp = lw_chat_session_default_params();
    sp.template_src = "{% for m in messages %}{% if m.content == 'boom' %}{{ raise_exception('no boom here') }}"
                      "{% endif %}{{ m.role }}: {% if m.role == 'assistant' %}[reply]{% else %}{{ m.content }}"
                      "{% endif %}{{ '\\n' }}{% endfor %}{% if add_generation_prompt %}assistant: {% endif %}";
    sp.n_predict = 3;
    CHECK(lw_chat_session_new(c, &sp, &cs) == LW_OK);
    CHECK(lw_chat_session_template(cs, NULL) == LW_CHAT_TEMPLATE_GIVEN);
    lw_chat_turn tr;
    CHECK(lw_chat_session_user(cs, "fine", 4, &tr) == LW_OK && tr.from_cell == 0);
    const uint32_t n1 = tr.n_prompt;
    int32_t tok = 0;
    CHECK(lw_chat_session_next(cs, NULL, &tok, NULL, NULL) == LW_ERR_INVALID_ARG && tok == -1);
    CHECK(lw_chat_session_next(cs, s, NULL, NULL, NULL) == LW_ERR_INVALID_ARG);
    static reply r;
    CHECK(gen_reply(cs, s, &r) == LW_OK);
    CHECK_MSG(r.len > 0 && r.text[0] != '[', "the reply (%zu bytes) must be non-empty and not start with '['", r.len);
    CHECK(lw_chat_session_n_messages(cs) == 2);
    const uint32_t past = lw_context_n_past(c);
    CHECK(lw_chat_session_user(cs, "boom", 4, &tr) == LW_ERR_INVALID_ARG);
    CHECK_MSG(strstr(lw_chat_session_error(cs), "no boom here") != NULL, "%s", lw_chat_session_error(cs));
    CHECK(lw_chat_session_n_messages(cs) == 2 && lw_context_n_past(c) == past);
    CHECK(lw_chat_session_user(cs, NULL, 3, &tr) == LW_ERR_INVALID_ARG && *lw_chat_session_error(cs));
    CHECK(lw_chat_session_add(cs, NULL, "x", 1) == LW_ERR_INVALID_ARG && *lw_chat_session_error(cs));
    CHECK(lw_chat_session_add(cs, "", "x", 1) == LW_ERR_INVALID_ARG);
    CHECK(lw_chat_session_message(cs, 2, NULL, NULL, NULL) == LW_ERR_INVALID_ARG);
    CHECK(lw_chat_session_n_messages(cs) == 2);
    CHECK(lw_chat_session_user(cs, "again", LW_CHAT_NUL_TERMINATED, &tr) == LW_OK);
    CHECK_MSG(tr.resumed && tr.resumed_at == strlen("user: fine\nassistant: ") && tr.from_cell == n1,
              "resume: %d at byte %zu, cell %u (want cell %u)", tr.resumed, tr.resumed_at, tr.from_cell, n1);
    CHECK(lw_chat_session_end_reply(cs) == LW_OK && lw_chat_session_turn(cs)->stop == LW_STOP_CALLBACK);
    CHECK(lw_chat_session_n_messages(cs) == 4);
    lw_chat_session_free(cs);

    /* no template and no fallback */
    sp = lw_chat_session_default_params();
    sp.fallback = 0;
    lw_chat_params tp;
    lw_chat_template *mt = model_template(m, &tp);
    lw_status st = lw_chat_session_new(c, &sp, &cs);
    CHECK(mt ? st == LW_OK : st == LW_ERR_NOT_FOUND);
    lw_chat_template_free(mt);
    lw_chat_session_free(cs);

    /* a model without a vocabulary */
    lw_model_params mp = lw_model_default_params();
    mp.no_vocab = 1;
    lw_model *nv = NULL;
    CHECK(lw_model_load_file(model_path, &mp, &nv) == LW_OK);
    lw_context *cn = nv ? make_context(nv, 64) : NULL;
    if (cn) {
        CHECK(lw_chat_session_new(cn, NULL, &cs) == LW_ERR_UNSUPPORTED && cs);
        CHECK_MSG(strstr(lw_chat_session_error(cs), "no_vocab") != NULL, "%s", lw_chat_session_error(cs));
        lw_chat_session_free(cs);
    }
    lw_context_free(cn);
    lw_model_free(nv);
    lw_sampler_free(s);
    lw_context_free(c);
}

/* ---------------------------------------------------------------------------------------------------------
 * Allocation failures
 * ------------------------------------------------------------------------------------------------------- */

/* An allocator that fails call number fail_at (counting from 0) and counts live blocks. */
typedef struct failing {
    long calls;   /* malloc/realloc calls so far        */
    long fail_at; /* the call that fails (-1: none)     */
    long live;    /* blocks allocated and not freed     */
    int failed;   /* 1 once the failure was injected    */
} failing;

static void *f_malloc(void *user, size_t n) {
    failing *f = user;
    if (f->calls++ == f->fail_at) return f->failed = 1, NULL;
    void *p = malloc(n ? n : 1);
    if (p) f->live++;
    return p;
}
static void *f_realloc(void *user, void *p, size_t n) {
    failing *f = user;
    if (f->calls++ == f->fail_at) return f->failed = 1, NULL;
    void *q = realloc(p, n ? n : 1);
    if (q && !p) f->live++;
    return q;
}
static void f_free(void *user, void *p) {
    failing *f = user;
    if (p) f->live--;
    free(p);
}

/* One scripted conversation with the failing allocator; every call succeeds or says LW_ERR_NOMEM. external:
 * the session decodes nothing, the script drives c as its caller. Returns whether the failure was injected. */
static int alloc_script(lw_context *c, lw_sampler *s, long fail_at, const char *system, int external) {
    failing f = {0, fail_at, 0, 0};
    lw_allocator a = {f_malloc, f_realloc, f_free, &f};
    lw_chat_session_params sp = lw_chat_session_default_params();
    sp.system = system;
    sp.n_predict = 6;
    sp.alloc = &a;
    lw_chat_session *cs = NULL;
    lw_status st = external ? lw_chat_session_new_model(lw_context_model(c), lw_context_n_ctx(c), &sp, &cs)
                            : lw_chat_session_new(c, &sp, &cs);
    CHECK_MSG(st == LW_OK || st == LW_ERR_NOMEM, "fail at %ld: new: %s", fail_at, lw_status_str(st));
    if (st == LW_OK) {
        static const char *msgs[] = {"Hello there", "What\0is 2+2?", "Tell me more"};
        static const size_t lens[] = {11, 12, 12};
        for (int i = 0; i < 3; i++) {
            size_t before = lw_chat_session_n_messages(cs);
            st = lw_chat_session_user(cs, msgs[i], lens[i], NULL);
            CHECK_MSG(st == LW_OK || st == LW_ERR_NOMEM, "fail at %ld: user %d: %s", fail_at, i, lw_status_str(st));
            if (st != LW_OK) {
                CHECK(lw_chat_session_n_messages(cs) == before);
                continue;
            }
            int32_t tok;
            if (external) {
                lw_chat_turn tr = *lw_chat_session_turn(cs);
                size_t n = 0;
                const int32_t *ids = lw_chat_session_prompt(cs, &n);
                CHECK(lw_context_set_n_past(c, tr.from_cell) == LW_OK && lw_decode(c, ids, (int32_t)n, 0) == LW_OK);
                do {
                    int dec = 0;
                    tok = lw_sample(c, s, -1);
                    st = lw_chat_session_push(cs, tok, &dec, NULL, NULL);
                    if (st == LW_OK && dec) CHECK(lw_decode(c, &tok, 1, 0) == LW_OK);
                } while (st == LW_OK && lw_chat_session_turn(cs)->stop == LW_STOP_NONE);
            } else {
                while ((st = lw_chat_session_next(cs, s, &tok, NULL, NULL)) == LW_OK && tok >= 0) {
                }
            }
            CHECK_MSG(st == LW_OK || st == LW_ERR_NOMEM, "fail at %ld: next %d: %s", fail_at, i, lw_status_str(st));
            /* a reply that could not be kept takes its message with it */
            CHECK(lw_chat_session_n_messages(cs) == (st == LW_OK ? before + 2 : before));
        }
        st = lw_chat_session_add(cs, "assistant", "x", 1);
        CHECK(st == LW_OK || st == LW_ERR_NOMEM);
    } else {
        CHECK(cs == NULL || *lw_chat_session_error(cs));
    }
    lw_chat_session_free(cs);
    CHECK_MSG(f.live == 0, "fail at %ld: %ld blocks leaked", fail_at, f.live);
    return f.failed;
}

static void check_alloc(lw_model *m) {
    lw_context *c = make_context(m, 512);
    lw_sampler *s = make_sampler(m, 0, 1, 1);
    if (!c || !s) return;
    for (int external = 0; external < 2; external++) {
        long n = 0;
        while (n < 2000 && alloc_script(c, s, n, "Be brief.", external)) n++;
        CHECK(n < 2000);
        printf("allocation failures%s: each of %ld allocator calls failed once, LW_ERR_NOMEM and no leak\n",
               external ? " (external decoding)" : "", n);
    }
    lw_sampler_free(s);
    lw_context_free(c);
}

int main(void) {
    /* the synth model: tiny llama, byte vocabulary, ChatML template */
    char path[1024];
    mkdir(test_tmp_dir(), 0777);
    snprintf(path, sizeof path, "%s/chat-session-chatml.gguf", test_tmp_dir());
    lw__synth_params sp = {0};
    sp.preset = "tiny";
    sp.type = "f32";
    sp.vocab_path = "builtin";
    sp.seed = 3;
    sp.chat_template = chatml;
    char err[LW_ERRMSG_SIZE] = "";
    CHECK_MSG(lw__synth_write(&sp, path, NULL, NULL, err) == LW_OK, "writing %s: %s", path, err);
    lw_model *m = NULL;
    CHECK_MSG(lw_model_load_file(path, NULL, &m) == LW_OK, "%s", m ? lw_model_error(m) : path);
    if (!m) return test_summary("test-chat-session");
    check_turns(m, "synth llama, ChatML", "Be brief.");
    check_full(m);
    check_external(m, NULL, 1, 0);
    /* a template that renders replies as "[reply]": every turn resumes where the previous reply started */
    check_external(m, "{% for m in messages %}{{ m.role }}: {% if m.role == 'assistant' %}[reply]{% else %}"
                      "{{ m.content }}{% endif %}{{ '\\n' }}{% endfor %}{% if add_generation_prompt %}assistant: {% endif %}",
                   0, 3);
    check_push_eog(m);
    check_tools(m);
    check_random(m);
    check_nul(m);
    check_errors(m, path);
    check_alloc(m);
    lw_model_free(m);

    /* stories260K: no template, the plain format */
    snprintf(path, sizeof path, "%s/models/stories260K.gguf", test_shared_dir());
    struct stat stt;
    if (stat(path, &stt) != 0) {
        if (test_failures) return test_summary("test-chat-session");
        printf("the synth-model parts passed (%d checks)\n", test_checks);
        test_skip("../shared/models/stories260K.gguf absent: the real-model part not run");
    }
    m = NULL;
    CHECK_MSG(lw_model_load_file(path, NULL, &m) == LW_OK, "%s", m ? lw_model_error(m) : path);
    if (m) check_turns(m, "stories260K, plain format", "A story.");
    lw_model_free(m);
    return test_summary("test-chat-session");
}
