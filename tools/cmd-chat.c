/* `llamaweb chat -m MODEL.gguf [--system S] [-n N] [--temp T] [--seed S] [--threads N] ...`: a conversation
 * on stdin/stdout. Each input line is a user message; the reply streams to stdout and ends with a newline.
 * `/reset` starts over (system prompt kept, sampler reseeded), `/quit` or end of input ends. With a
 * terminal on stdin a "> " prompt is shown; from a pipe the output is the replies only (tests use that).
 * With --tools FILE (OpenAI's tools array) the template renders the tools (its `tools` variable, as
 * llama.cpp's --jinja does), each reply is parsed for tool calls ("tool_calls: [...]" after it), and
 * `/tool TEXT` answers with a tool's result (a "tool" message) instead of a user message.
 *
 * The conversation is rendered with the model's chat template (tokenizer.chat_template, run by src/chat's
 * Jinja interpreter), or with a plain format when the file has none (or one that does not parse):
 *     SYSTEM\n\nUser: MESSAGE\nAssistant:REPLY\nUser: MESSAGE\nAssistant:
 * The KV cache is kept across turns: the cache holds the conversation's text up to the end of the last reply,
 * so each turn decodes only the part of the new rendering after it (the reply's end marker, the new user
 * message, the assistant header). Where a template re-renders earlier text differently (one that trims the
 * replies, say), decoding resumes from the last chunk boundary that still matches. When the context is full
 * the conversation starts over from the system prompt and the new message; a message too long even for that
 * is refused (the conversation stays). -v prints per turn how many new tokens were decoded from which cell.
 * All of that is the library's chat session (lw_chat_session_*, src/chat/chat-session.c); this file is its
 * terminal front end. Messages and replies are byte strings with lengths: NUL bytes pass through. */
#include "cli.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Whether line[0..n) is exactly the command cmd. */
static int is_command(const char *line, size_t n, const char *cmd) {
    return n == strlen(cmd) && !memcmp(line, cmd, n);
}

/* One turn: the message (a user's or a tool's) in, the reply streamed out. Returns 0, 1 on a fatal error
 * (memory), or -1 when the turn failed and the conversation goes on (no reply). */
static int turn(lw_chat_session *cs, lw_context *c, lw_sampler *s, const char *role, const char *msg,
                size_t len, int verbose) {
    lw_chat_turn tr = {0};
    double t0 = lw__cli_now();
    lw_status st = lw_chat_session_send(cs, role, msg, len, &tr);
    if (verbose && tr.resumed)
        fprintf(stderr, "[the template changed earlier text: resuming at byte %zu, cell %u]\n", tr.resumed_at,
                tr.from_cell);
    if (tr.restarted)
        fprintf(stderr, "llamaweb chat: the context (%u cells) is full: starting over with the system prompt\n",
                lw_context_n_ctx(c));
    if (st != LW_OK) {
        fprintf(stderr, "llamaweb chat: %s\n", lw_chat_session_error(cs));
        return st == LW_ERR_NOMEM ? 1 : -1;
    }
    double t_first = 0;
    int32_t tok;
    const char *piece;
    size_t n;
    while ((st = lw_chat_session_next(cs, s, &tok, &piece, &n)) == LW_OK && tok >= 0) {
        if (t_first == 0) t_first = lw__cli_now();
        fwrite(piece, 1, n, stdout);
        fflush(stdout);
    }
    double t1 = lw__cli_now();
    fputc('\n', stdout);
    fflush(stdout);
    if (st != LW_OK) {
        fprintf(stderr, "llamaweb chat: %s\n", lw_chat_session_error(cs));
        return st == LW_ERR_NOMEM;
    }
    if (verbose) {
        static const char *why[] = {"none", "end of generation", "length", "callback", "context full"};
        const lw_chat_turn *r = lw_chat_session_turn(cs);
        double tf = t_first ? t_first : t1;
        fprintf(stderr, "[turn: %u new prompt tokens from cell %u in %.1f ms, %d reply tokens in %.1f ms, stop: %s, "
                        "%u cells in use]\n",
                r->n_prompt, r->from_cell, 1e3 * (tf - t0), r->n_generated, 1e3 * (t1 - tf), why[r->stop],
                lw_context_n_past(c));
    }
    return 0;
}

static int chat_usage(void) {
    fprintf(stderr, "usage: llamaweb chat -m MODEL.gguf [options]   (one user message per input line)\n"
                    "  --system TEXT      system prompt\n"
                    "  -n N               most tokens per reply (default: until end of generation)\n"
                    "  --ctx N            context cells (default: the model's, at most 4096)\n"
                    "  -v, --verbose      per-turn figures on stderr\n");
    lw__cli_gen_usage(stderr);
    fprintf(stderr, "commands: /reset (start over), /tool TEXT (a tool's result, with --tools), /quit\n");
    return 2;
}

int lw__cmd_chat(int argc, char **argv) {
    const char *model_path = NULL;
    lw__cli_gen o;
    lw__cli_gen_defaults(&o);
    lw_chat_session_params sp = lw_chat_session_default_params();
    uint32_t n_ctx = 0;
    int verbose = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        int used = lw__cli_gen_option(a, v, &o);
        if (used < 0) {
            fprintf(stderr, "llamaweb chat: bad value for %s\n", a);
            return 2;
        }
        if (used > 0) {
            i += used - 1;
            continue;
        }
        if (!strcmp(a, "-m") && v) model_path = v, i++;
        else if (!strcmp(a, "--system") && v) sp.system = v, i++;
        else if (!strcmp(a, "-n") && v) sp.n_predict = atoi(v), i++;
        else if (!strcmp(a, "--ctx") && v) n_ctx = (uint32_t)strtoul(v, NULL, 10), i++;
        else if (!strcmp(a, "-v") || !strcmp(a, "--verbose")) verbose = 1;
        else return chat_usage();
    }
    if (!model_path) return chat_usage();

    int rc = 1;
    char *line = NULL;
    size_t line_cap = 0;
    lw_model *m = NULL;
    lw_context *c = NULL;
    lw_sampler *s = NULL;
    lw_chat_session *cs = NULL;
    double t0 = lw__cli_now();
    if (lw__cli_load_model_rows("chat", model_path, &o.rows, 0, &m)) return 1;
    if (lw__cli_gen_context("chat", m, &o, n_ctx, &c, &s)) goto done;
    char *tools = NULL; /* --tools: the template's `tools` (the session keeps a copy) */
    if (o.tools_file && !(tools = lw__cli_read_file(o.tools_file, &(size_t){0}))) {
        fprintf(stderr, "llamaweb chat: cannot read %s\n", o.tools_file);
        goto done;
    }
    sp.tools = tools;
    lw_status st = lw_chat_session_new(c, &sp, &cs);
    free(tools);
    if (st != LW_OK) {
        fprintf(stderr, "llamaweb chat: %s\n", cs ? lw_chat_session_error(cs) : "out of memory");
        goto done;
    }
    const char *why = "";
    lw_chat_template_kind kind = lw_chat_session_template(cs, &why);
    if (*why) fprintf(stderr, "llamaweb chat: the model's chat template does not parse (%s): using the plain format\n", why);
    if (o.tools_file && kind == LW_CHAT_TEMPLATE_PLAIN)
        fprintf(stderr,
                "llamaweb chat: the plain format shows no tools to the model (replies are still parsed)\n");
    fprintf(stderr, "llamaweb chat: %s, %d layers, context %u cells, %d threads, %s, load %.0f ms\n", lw_model_arch(m),
            lw_model_n_layer(m), lw_context_n_ctx(c), lw_context_n_threads(c),
            kind != LW_CHAT_TEMPLATE_PLAIN ? "the model's chat template" : "no chat template: plain User:/Assistant: format",
            1e3 * (lw__cli_now() - t0));

    const int interactive = isatty(STDIN_FILENO);
    for (;;) {
        if (interactive) {
            fputs("> ", stdout);
            fflush(stdout);
        }
        ssize_t got = getline(&line, &line_cap, stdin);
        if (got < 0) break;
        size_t n = (size_t)got;
        while (n > 0 && (line[n - 1] == '\n' || line[n - 1] == '\r')) line[--n] = 0;
        if (n == 0) continue;
        if (is_command(line, n, "/quit") || is_command(line, n, "/exit")) break;
        if (is_command(line, n, "/reset")) {
            lw_chat_session_reset(cs);
            lw_sampler_reset(s, o.sampler.seed);
            if (interactive) fprintf(stderr, "[conversation reset]\n");
            continue;
        }
        const char *role = "user", *msg = line;
        if (n >= 6 && !memcmp(line, "/tool ", 6)) role = "tool", msg = line + 6, n -= 6;
        if (o.grammar) lw_grammar_reset(o.grammar); /* every reply follows the grammar from its start */
        const int r = turn(cs, c, s, role, msg, n, verbose);
        if (r > 0) {
            fprintf(stderr, "llamaweb chat: out of memory\n");
            goto done;
        }
        if (r < 0) continue; /* no reply to parse */
        size_t reply_len = 0;
        const char *reply = lw_chat_session_reply(cs, &reply_len);
        lw__cli_gen_tool_calls(&o, reply, reply_len);
    }
    if (interactive) fputc('\n', stdout);
    rc = 0;
done:
    free(line);
    lw_chat_session_free(cs);
    lw__cli_gen_close(m, c, s);
    lw__cli_gen_free_grammar(&o);
    return rc;
}
