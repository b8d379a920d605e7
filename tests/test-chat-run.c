/* `llamaweb chat` driven through a pipe, against replies computed here through the public C API.
 *
 * For each model the CLI gets a few user lines (and a /reset) on stdin and greedy settings; its stdout must be
 * exactly the replies, one per line, where each expected reply is computed from scratch in a fresh context:
 * the conversation rendered (the model's template through lw_chat_template_render, or the plain fallback
 * format written out here from its specification), tokenized through the model, decoded in one call, and
 * continued with lw_generate. Turn 2's expectation decodes turn 1's prompt, turn 1's generated tokens and the
 * new part of the rendering together, so the CLI's kept KV cache has to hold exactly that conversation; its
 * -v line must also show that only the new part was decoded. After /reset the first reply must come again.
 *
 * Models: a synth llama with the built-in byte vocab and a ChatML template given to `llamaweb synth
 * --chat-template` (always runs), the same with a template that does not parse (plain format); a synth llama with the Phi-3 tokenizer and its own template, and the real
 * stories260K with no template (the fallback format), when the shared data folder has them. */
#include "llamaweb.h"
#include "test.h"

#include <stdint.h>
#include <sys/stat.h>

#define N_PREDICT 12  /* reply length cap given to the CLI (-n) and used by the expectation */
#define CAP (1 << 16) /* text buffers */

/* Runs a shell command; returns its exit status and its stdout in out (NUL-terminated). */
static int run(const char *cmd, char *out, size_t cap) {
    FILE *p = popen(cmd, "r");
    if (!p) return -1;
    size_t n = fread(out, 1, cap - 1, p);
    out[n] = 0;
    int st = pclose(p);
    return st == -1 ? -1 : (st >> 8) & 0xff;
}

static int exists(const char *path) {
    struct stat st;
    return stat(path, &st) == 0;
}

/* Text collected from lw_generate's callback. */
typedef struct text {
    char s[CAP]; /* bytes, NUL-terminated */
    size_t n;    /* used                  */
} text;

static int collect(void *user, int32_t token, const char *piece, size_t len) {
    text *t = user;
    (void)token;
    if (t->n + len >= sizeof t->s) return 1;
    memcpy(t->s + t->n, piece, len);
    t->s[t->n += len] = 0;
    return 0;
}

/* One reply computed from scratch: a fresh context decodes ids[0..n) and generates greedily. The generated
 * ids go to gen (*n_gen of them) and the text to reply; *stop says why it ended. */
static void reference_reply(lw_model *m, const int32_t *ids, size_t n, text *reply, int32_t *gen, int *n_gen,
                            lw_stop_reason *stop) {
    lw_context_params cp = lw_context_default_params();
    cp.n_ctx = 1024;
    cp.n_threads = 1;
    lw_context *c = NULL;
    lw_sampler *s = NULL;
    lw_sampler_params sp = lw_sampler_default_params();
    sp.temp = 0;
    reply->n = 0, reply->s[0] = 0;
    *n_gen = 0;
    CHECK_MSG(lw_context_create(m, &cp, &c) == LW_OK, "%s", lw_context_error(c));
    CHECK(lw_sampler_create(lw_model_n_vocab(m), &sp, NULL, &s) == LW_OK);
    if (c && s) {
        lw_generate_params gp = lw_generate_default_params();
        gp.n_predict = N_PREDICT;
        gp.on_token = collect;
        gp.user = reply;
        gp.tokens = gen;
        gp.tokens_cap = N_PREDICT;
        lw_generate_result r;
        CHECK_MSG(lw_generate(c, s, ids, n, &gp, &r) == LW_OK, "%s", lw_context_error(c));
        CHECK(r.n_prompt == (int32_t)n && r.n_generated >= 1 && r.n_generated <= N_PREDICT);
        *n_gen = r.n_generated;
        *stop = r.stop;
    }
    lw_sampler_free(s);
    lw_context_free(c);
}

/* Appends the ids of text (special tokens parsed, nothing added) to ids[*n]. */
static void add_tokens(lw_model *m, const char *s, size_t len, int32_t *ids, size_t *n, size_t cap) {
    size_t k = 0;
    CHECK_MSG(lw_model_tokenize(m, s, len, 0, 1, ids + *n, cap - *n, &k) == LW_OK, "%s", lw_model_error(m));
    *n += k;
}

/* The rendering of a conversation: the model's template, or the fallback format (documented in
 * tools/cmd-chat.c: "SYSTEM\n\nUser: MESSAGE\nAssistant:REPLY\n...Assistant:"). */
static void render(lw_chat_template *t, const lw_chat_params *tp, const lw_chat_message *msgs, size_t n,
                   text *out) {
    out->n = 0, out->s[0] = 0;
    if (!t) {
        for (size_t i = 0; i < n; i++) {
            const char *r = msgs[i].role;
            out->n += (size_t)snprintf(out->s + out->n, CAP - out->n, !strcmp(r, "system") ? "%s\n\n"
                                                                      : !strcmp(r, "user") ? "User: %s\n"
                                                                                           : "Assistant:%s\n",
                                       msgs[i].content);
        }
        out->n += (size_t)snprintf(out->s + out->n, CAP - out->n, "Assistant:");
        return;
    }
    char *s = NULL;
    size_t len = 0;
    CHECK_MSG(lw_chat_template_render(t, msgs, n, tp, &s, &len) == LW_OK, "%s", lw_chat_template_error(t));
    if (s && len < CAP) memcpy(out->s, s, len + 1), out->n = len;
    lw_chat_string_free(t, s);
}

/* Drives `llamaweb chat` on model with two user turns, /reset and the first turn again; checks stdout and the
 * per-turn figures against the expectation. */
static void check_chat(const char *cli, const char *model, const char *system) {
    static text r1, r2, p1, p2, out, err_text;
    static int32_t ids[8192], gen1[N_PREDICT], gen2[N_PREDICT];
    const char *u1 = "Hello there", *u2 = "What is 2+2?";
    printf("model %s%s%s\n", model, system ? ", system prompt: " : "", system ? system : "");

    lw_model *m = NULL;
    CHECK_MSG(lw_model_load_file(model, NULL, &m) == LW_OK, "%s", lw_model_error(m));
    const lw_vocab *v = lw_model_vocab(m);
    CHECK(v != NULL);
    if (!v) {
        lw_model_free(m);
        return;
    }
    const char *tsrc = NULL;
    lw_chat_params tp;
    lw_chat_params_default(&tp);
    tp.add_generation_prompt = 1;
    lw_chat_template *t = NULL;
    char why[256];
    /* a template that does not parse falls back to the plain format, as a missing one */
    if (lw_chat_from_gguf(lw_model_gguf(m), &tsrc, &tp.bos_token, &tp.eos_token) == LW_OK &&
        lw_chat_template_parse(tsrc, strlen(tsrc), NULL, &t, why, sizeof why) != LW_OK)
        printf("  the template does not parse (%s): plain format expected\n", why);

    /* turn 1: [system,] user */
    lw_chat_message msgs[4];
    size_t nm = 0;
    if (system) msgs[nm++] = (lw_chat_message){"system", system};
    msgs[nm++] = (lw_chat_message){"user", u1};
    render(t, &tp, msgs, nm, &p1);
    size_t n1 = 0;
    const char *bos = tp.bos_token;
    if (lw_vocab_adds_bos(v) && !(bos && *bos && !strncmp(p1.s, bos, strlen(bos))))
        ids[n1++] = lw_vocab_special(v, LW_TOKEN_BOS);
    add_tokens(m, p1.s, p1.n, ids, &n1, 8192);
    int ng1 = 0, ng2 = 0;
    lw_stop_reason stop1 = LW_STOP_NONE, stop2 = LW_STOP_NONE;
    reference_reply(m, ids, n1, &r1, gen1, &ng1, &stop1);
    /* messages are C strings: a reply with a NUL byte (random byte tokens) would be cut there */
    CHECK_MSG(strlen(r1.s) == r1.n, "reply 1 has a NUL byte: pick another seed for this model");

    /* turn 2: the conversation so far + the reply + the next message; the KV cache holds turn 1's prompt and
     * its reply tokens (an end-of-generation token excluded: the template writes the turn's end) */
    msgs[nm++] = (lw_chat_message){"assistant", r1.s};
    msgs[nm++] = (lw_chat_message){"user", u2};
    render(t, &tp, msgs, nm, &p2);
    CHECK_MSG(p2.n >= p1.n + r1.n && !memcmp(p2.s, p1.s, p1.n) && !memcmp(p2.s + p1.n, r1.s, r1.n),
              "turn 2's rendering does not extend turn 1's");
    size_t n2 = n1;
    int kept = stop1 == LW_STOP_EOG ? ng1 - 1 : ng1;
    for (int i = 0; i < kept; i++) ids[n2++] = gen1[i];
    const size_t cell2 = n2;
    add_tokens(m, p2.s + p1.n + r1.n, p2.n - p1.n - r1.n, ids, &n2, 8192);
    reference_reply(m, ids, n2, &r2, gen2, &ng2, &stop2);
    printf("  reply 1 (%d tokens): %s\n  reply 2 (%d tokens after %zu cells + %zu new): %s\n", ng1, r1.s, ng2, cell2,
           n2 - cell2, r2.s);

    /* the CLI: same turns, then /reset and turn 1 again */
    char in_path[1024], err_path[1024], cmd[4096];
    snprintf(in_path, sizeof in_path, "%s/chat-run-input.txt", test_tmp_dir());
    snprintf(err_path, sizeof err_path, "%s/chat-run-stderr.txt", test_tmp_dir());
    FILE *f = fopen(in_path, "wb");
    CHECK(f != NULL);
    if (f) {
        fprintf(f, "%s\n%s\n/reset\n%s\n", u1, u2, u1);
        fclose(f);
    }
    snprintf(cmd, sizeof cmd, "'%s' chat -m '%s' %s%s%s -n %d --temp 0 -t 2 --ctx 1024 -v < '%s' 2> '%s'", cli,
             model, system ? "--system '" : "", system ? system : "", system ? "'" : "", N_PREDICT, in_path,
             err_path);
    CHECK(run(cmd, out.s, sizeof out.s) == 0);
    static char want[3 * CAP + 8];
    snprintf(want, sizeof want, "%s\n%s\n%s\n", r1.s, r2.s, r1.s);
    CHECK_MSG(!strcmp(out.s, want), "stdout:\n%s\nwanted:\n%s", out.s, want);

    /* figures: turn 2 decoded only the new part, after the cells of turn 1 */
    f = fopen(err_path, "rb");
    CHECK(f != NULL);
    if (f) {
        err_text.n = fread(err_text.s, 1, CAP - 1, f);
        err_text.s[err_text.n] = 0;
        fclose(f);
    }
    char line[128];
    snprintf(line, sizeof line, "[turn: %zu new prompt tokens from cell 0", n1);
    CHECK_MSG(strstr(err_text.s, line) != NULL, "no '%s' in:\n%s", line, err_text.s);
    snprintf(line, sizeof line, "[turn: %zu new prompt tokens from cell %zu", n2 - cell2, cell2);
    CHECK_MSG(strstr(err_text.s, line) != NULL, "no '%s' in:\n%s", line, err_text.s);
    lw_chat_template_free(t);
    lw_model_free(m);
}

/* A context too small for two turns: turn 2 starts over from the system prompt and its own message, so its
 * reply is the one computed for that short conversation; a message that cannot fit at all is refused. */
static void check_overflow(const char *cli, const char *model, const char *system) {
    static text r, p, out;
    static int32_t ids[4096], gen[N_PREDICT];
    lw_model *m = NULL;
    CHECK_MSG(lw_model_load_file(model, NULL, &m) == LW_OK, "%s", lw_model_error(m));
    if (!m) return;
    const char *tsrc = NULL;
    lw_chat_params tp;
    lw_chat_params_default(&tp);
    tp.add_generation_prompt = 1;
    lw_chat_template *t = NULL;
    char why[256];
    CHECK(lw_chat_from_gguf(lw_model_gguf(m), &tsrc, &tp.bos_token, &tp.eos_token) == LW_OK);
    CHECK_MSG(lw_chat_template_parse(tsrc, strlen(tsrc), NULL, &t, why, sizeof why) == LW_OK, "%s", why);
    lw_chat_message msgs[2] = {{"system", system}, {"user", "What is 2+2?"}};
    render(t, &tp, msgs, 2, &p);
    size_t n = 0;
    if (lw_vocab_adds_bos(lw_model_vocab(m))) ids[n++] = lw_vocab_special(lw_model_vocab(m), LW_TOKEN_BOS);
    add_tokens(m, p.s, p.n, ids, &n, 4096);
    int ng = 0;
    lw_stop_reason stop;
    reference_reply(m, ids, n, &r, gen, &ng, &stop);
    /* room for this conversation and its reply, not for turn 1 + turn 2 */
    const size_t n_ctx = n + N_PREDICT + 8;
    printf("overflow: context %zu cells, restarted conversation %zu tokens\n", n_ctx, n);

    char in_path[1024], err_path[1024], cmd[4096];
    snprintf(in_path, sizeof in_path, "%s/chat-run-overflow.txt", test_tmp_dir());
    snprintf(err_path, sizeof err_path, "%s/chat-run-overflow-stderr.txt", test_tmp_dir());
    FILE *f = fopen(in_path, "wb");
    CHECK(f != NULL);
    if (f) {
        /* turn 1, turn 2 (starts over), then a message far longer than the context (refused) */
        fprintf(f, "Hello there\nWhat is 2+2?\n");
        for (size_t i = 0; i < 2 * n_ctx; i++) fputc('a' + (int)(i % 26), f);
        fputc('\n', f);
        fclose(f);
    }
    snprintf(cmd, sizeof cmd, "'%s' chat -m '%s' --system '%s' -n %d --temp 0 --ctx %zu < '%s' 2> '%s'", cli, model,
             system, N_PREDICT, n_ctx, in_path, err_path);
    CHECK(run(cmd, out.s, sizeof out.s) == 0);
    /* stdout: turn 1's reply line, then this one (the refused message prints nothing) */
    out.n = strlen(out.s);
    CHECK_MSG(out.n >= r.n + 2 && out.s[out.n - r.n - 2] == '\n' && !memcmp(out.s + out.n - r.n - 1, r.s, r.n) &&
                  out.s[out.n - 1] == '\n',
              "stdout:\n%s\nwanted at the end:\n%s", out.s, r.s);
    f = fopen(err_path, "rb");
    if (f) {
        out.n = fread(out.s, 1, CAP - 1, f);
        out.s[out.n] = 0;
        fclose(f);
    }
    CHECK_MSG(strstr(out.s, "is full: starting over") && strstr(out.s, "does not fit the context"), "stderr: %s", out.s);
    lw_chat_template_free(t);
    lw_model_free(m);
}

int main(void) {
    const char *cli = getenv("LW_CLI");
    if (!cli || !*cli) test_skip("LW_CLI is not set (run through ctest)");
    char tmpl[1024], model[1024], cmd[4096], out[4096], mk[1100];
    snprintf(mk, sizeof mk, "mkdir -p '%s'", test_tmp_dir());
    CHECK(system(mk) == 0);

    /* synth model, built-in byte vocab, ChatML template */
    snprintf(tmpl, sizeof tmpl, "%s/chat-run-chatml.jinja", test_tmp_dir());
    FILE *f = fopen(tmpl, "wb");
    CHECK(f != NULL);
    if (!f) return test_summary("test-chat-run");
    fputs("{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
          "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}",
          f);
    fclose(f);
    snprintf(model, sizeof model, "%s/chat-run-chatml.gguf", test_tmp_dir());
    snprintf(cmd, sizeof cmd, "'%s' synth --preset tiny --type f32 --vocab builtin --seed 3 --chat-template '%s' -o '%s'",
             cli, tmpl, model);
    CHECK(run(cmd, out, sizeof out) == 0);
    check_chat(cli, model, "Be brief.");
    check_overflow(cli, model, "Be brief.");

    /* a broken template (an unclosed block): the plain format */
    snprintf(tmpl, sizeof tmpl, "%s/chat-run-broken.jinja", test_tmp_dir());
    f = fopen(tmpl, "wb");
    CHECK(f != NULL);
    if (f) {
        fputs("{% for m in messages %}{{ m.content }}", f);
        fclose(f);
    }
    snprintf(model, sizeof model, "%s/chat-run-broken.gguf", test_tmp_dir());
    snprintf(cmd, sizeof cmd, "'%s' synth --preset tiny --type f32 --vocab builtin --seed 6 --chat-template '%s' -o '%s'",
             cli, tmpl, model);
    CHECK(run(cmd, out, sizeof out) == 0);
    check_chat(cli, model, "Be brief.");

    /* synth model with the Phi-3 tokenizer and its template (no system role; starts with bos_token) */
    char vocab[1024];
    snprintf(vocab, sizeof vocab, "%s/vocab/ggml-vocab-phi-3.gguf", test_shared_dir());
    if (exists(vocab)) {
        snprintf(model, sizeof model, "%s/chat-run-phi3.gguf", test_tmp_dir());
        snprintf(cmd, sizeof cmd, "'%s' synth --preset tiny --type f32 --vocab '%s' --seed 5 -o '%s'", cli, vocab,
                 model);
        CHECK(run(cmd, out, sizeof out) == 0);
        check_chat(cli, model, NULL);
    } else {
        printf("note: %s absent: Phi-3 template part not run\n", vocab);
    }

    /* stories260K: no template, the plain fallback format */
    snprintf(model, sizeof model, "%s/models/stories260K.gguf", test_shared_dir());
    if (exists(model))
        check_chat(cli, model, "A story.");
    else
        printf("note: %s absent: fallback-format part not run\n", model);

    /* misuse: usage (2), a missing model (1 with the path in the message) */
    snprintf(cmd, sizeof cmd, "'%s' chat < /dev/null 2>/dev/null", cli);
    CHECK(run(cmd, out, sizeof out) == 2);
    snprintf(cmd, sizeof cmd, "'%s' chat -m /nonexistent.gguf < /dev/null 2>&1", cli);
    CHECK(run(cmd, out, sizeof out) == 1 && strstr(out, "nonexistent"));
    return test_summary("test-chat-run");
}
