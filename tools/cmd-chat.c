/* `llamaweb chat -m MODEL.gguf [--system S] [-n N] [--temp T] [--seed S] [--threads N] ...`: a conversation
 * on stdin/stdout. Each input line is a user message; the reply streams to stdout and ends with a newline.
 * `/reset` starts over (system prompt kept, sampler reseeded), `/quit` or end of input ends. With a
 * terminal on stdin a "> " prompt is shown; from a pipe the output is the replies only (tests use that).
 *
 * The conversation is rendered with the model's chat template (tokenizer.chat_template, run by src/chat's
 * Jinja interpreter), or with a plain format when the file has none (or one that does not parse):
 *     SYSTEM\n\nUser: MESSAGE\nAssistant:REPLY\nUser: MESSAGE\nAssistant:
 * The KV cache is kept across turns: the cache holds the conversation's text up to the end of the last reply,
 * so each turn decodes only the part of the new rendering after it (the reply's end marker, the new user
 * message, the assistant header). Where a template re-renders earlier text differently (one that trims the
 * replies, say), decoding resumes from the last chunk boundary that still matches. When the context is full
 * the conversation starts over from the system prompt and the new message; a message too long even for that
 * is refused (the conversation stays). -v prints per turn how many new tokens were decoded from which cell. */
#include "cli.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The plain format for models without a chat template (BOS comes from the tokenizer, see chunk_tokens). */
static const char fallback_template[] =
    "{% for m in messages %}"
    "{% if m.role == 'system' %}{{ m.content }}\n\n"
    "{% elif m.role == 'user' %}User: {{ m.content }}\n"
    "{% else %}Assistant:{{ m.content }}\n{% endif %}"
    "{% endfor %}"
    "{% if add_generation_prompt %}Assistant:{% endif %}";

/* A chunk boundary: the KV cache state when text [0, text_off) had been decoded. */
typedef struct checkpoint {
    size_t text_off; /* bytes of the conversation text decoded so far */
    uint32_t n_past; /* cache cells then                             */
} checkpoint;

/* A growable byte buffer. */
typedef struct buffer {
    char *p;    /* bytes, NUL-terminated */
    size_t len; /* used                  */
    size_t cap; /* allocated             */
} buffer;

static int buf_append(buffer *b, const char *s, size_t n) {
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->len + n + 1) cap *= 2;
        char *p = realloc(b->p, cap);
        if (!p) return 0;
        b->p = p, b->cap = cap;
    }
    if (n) memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = 0;
    return 1;
}

/* Everything one chat session holds. */
typedef struct chat {
    lw_model *m;              /* the model                                               */
    lw_context *c;            /* its context (KV cache kept across turns)                */
    lw_sampler *s;            /* the sampler (reseeded by /reset)                        */
    const lw_vocab *v;        /* the model's vocabulary                                  */
    lw_chat_template *tmpl;   /* the chat template (the model's or the plain fallback)   */
    lw_chat_params tp;        /* render options (BOS/EOS texts)                          */
    lw_chat_message *msgs;    /* the conversation; contents are malloc'd copies          */
    size_t n_msgs, cap_msgs;  /* messages used / allocated                               */
    size_t n_keep;            /* messages /reset keeps (the system prompt)               */
    buffer kv_text;           /* the conversation text the KV cache holds                */
    checkpoint *cps;          /* chunk boundaries, cps[0] = {0, 0}                       */
    size_t n_cps, cap_cps;    /* used / allocated                                        */
    int32_t *ids;             /* token ids of a chunk                                    */
    size_t cap_ids;           /* allocated                                               */
    buffer reply;             /* the reply being generated                               */
    lw_generate_params gp;    /* generation settings                                     */
    uint64_t seed;            /* sampler seed (for /reset)                               */
    int verbose;              /* per-turn figures on stderr                              */
    double t_first;           /* when the first reply token came (s)                     */
} chat;

static int add_message(chat *ch, const char *role, const char *content) {
    if (ch->n_msgs == ch->cap_msgs) {
        size_t cap = ch->cap_msgs ? 2 * ch->cap_msgs : 16;
        lw_chat_message *p = realloc(ch->msgs, cap * sizeof *p);
        if (!p) return 0;
        ch->msgs = p, ch->cap_msgs = cap;
    }
    char *copy = strdup(content);
    if (!copy) return 0;
    ch->msgs[ch->n_msgs++] = (lw_chat_message){role, copy};
    return 1;
}

static void drop_messages(chat *ch, size_t keep) {
    while (ch->n_msgs > keep) free((char *)ch->msgs[--ch->n_msgs].content);
}

static int push_checkpoint(chat *ch, size_t text_off, uint32_t n_past) {
    if (ch->n_cps && ch->cps[ch->n_cps - 1].text_off == text_off) {
        ch->cps[ch->n_cps - 1].n_past = n_past;
        return 1;
    }
    if (ch->n_cps == ch->cap_cps) {
        size_t cap = ch->cap_cps ? 2 * ch->cap_cps : 16;
        checkpoint *p = realloc(ch->cps, cap * sizeof *p);
        if (!p) return 0;
        ch->cps = p, ch->cap_cps = cap;
    }
    ch->cps[ch->n_cps++] = (checkpoint){text_off, n_past};
    return 1;
}

/* Forgets the KV cache: the next turn decodes the whole conversation. */
static void forget_cache(chat *ch) {
    lw_context_set_n_past(ch->c, 0);
    ch->kv_text.len = 0;
    ch->n_cps = 0;
    push_checkpoint(ch, 0, 0);
}

/* Token ids of text (a chunk of the rendered conversation; special tokens written in it become their ids).
 * The first chunk starts with BOS when the vocabulary adds one and the template did not write it. */
static lw_status chunk_tokens(chat *ch, const char *text, size_t len, int first, size_t *n) {
    size_t need = 4 * len + 3, k = 0;
    if (need > ch->cap_ids) {
        int32_t *p = realloc(ch->ids, need * sizeof *p);
        if (!p) return LW_ERR_NOMEM;
        ch->ids = p, ch->cap_ids = need;
    }
    const char *bos = ch->tp.bos_token;
    int32_t bos_id = lw_vocab_special(ch->v, LW_TOKEN_BOS);
    if (first && lw_vocab_adds_bos(ch->v) && bos_id >= 0 &&
        !(bos && *bos && !strncmp(text, bos, strlen(bos))))
        ch->ids[k++] = bos_id;
    lw_status st = lw_model_tokenize(ch->m, text, len, 0, 1, ch->ids + k, ch->cap_ids - k, n);
    *n += k;
    return st;
}

/* Streams a reply token's text to stdout and keeps it. */
static int on_token(void *user, int32_t token, const char *text, size_t len) {
    chat *ch = user;
    (void)token;
    if (ch->t_first == 0) ch->t_first = lw__cli_now();
    fwrite(text, 1, len, stdout);
    fflush(stdout);
    return buf_append(&ch->reply, text, len) ? 0 : 1;
}

/* One turn: the user's message in, the reply out. Returns 0, or 1 on a fatal error. */
static int turn(chat *ch, const char *message) {
    if (!add_message(ch, "user", message)) return 1;
    char *prompt = NULL;
    size_t prompt_len = 0, n_ids = 0;
    int restarted = 0;
    for (;;) {
        ch->tp.add_generation_prompt = 1;
        if (lw_chat_template_render(ch->tmpl, ch->msgs, ch->n_msgs, &ch->tp, &prompt, &prompt_len) != LW_OK) {
            fprintf(stderr, "llamaweb chat: the chat template failed: %s\n", lw_chat_template_error(ch->tmpl));
            drop_messages(ch, ch->n_msgs - 1);
            return 0;
        }
        /* resume from the last chunk boundary inside the part of the text that did not change */
        size_t same = 0;
        while (same < ch->kv_text.len && same < prompt_len && ch->kv_text.p[same] == prompt[same]) same++;
        if (same < ch->kv_text.len) {
            size_t k = ch->n_cps - 1;
            while (ch->cps[k].text_off > same) k--;
            if (ch->verbose)
                fprintf(stderr, "[the template changed earlier text: resuming at byte %zu, cell %u]\n",
                        ch->cps[k].text_off, ch->cps[k].n_past);
            lw_context_set_n_past(ch->c, ch->cps[k].n_past);
            ch->kv_text.len = ch->cps[k].text_off;
            ch->n_cps = k + 1;
        }
        size_t off = ch->kv_text.len;
        lw_status st = chunk_tokens(ch, prompt + off, prompt_len - off, lw_context_n_past(ch->c) == 0, &n_ids);
        if (st != LW_OK) {
            fprintf(stderr, "llamaweb chat: %s\n", lw_model_error(ch->m));
            lw_chat_string_free(ch->tmpl, prompt);
            return 1;
        }
        /* room for the new part and at least one reply token */
        if ((uint64_t)lw_context_n_past(ch->c) + n_ids < lw_context_n_ctx(ch->c)) break;
        lw_chat_string_free(ch->tmpl, prompt);
        prompt = NULL;
        /* Full: start over from the system prompt and this message, if those fit (else refuse the message and
         * keep the conversation as it was). */
        int fits = 0;
        if (!restarted) {
            lw_chat_message *short_conv = malloc((ch->n_keep + 1) * sizeof *short_conv);
            if (!short_conv) return 1;
            memcpy(short_conv, ch->msgs, ch->n_keep * sizeof *short_conv);
            short_conv[ch->n_keep] = ch->msgs[ch->n_msgs - 1];
            if (lw_chat_template_render(ch->tmpl, short_conv, ch->n_keep + 1, &ch->tp, &prompt, &prompt_len) ==
                LW_OK) {
                st = chunk_tokens(ch, prompt, prompt_len, 1, &n_ids);
                fits = st == LW_OK && (uint64_t)n_ids < lw_context_n_ctx(ch->c);
                lw_chat_string_free(ch->tmpl, prompt);
                prompt = NULL;
            }
            free(short_conv);
        }
        if (!fits) {
            fprintf(stderr, "llamaweb chat: the message does not fit the context (%zu tokens, %u cells)\n", n_ids,
                    lw_context_n_ctx(ch->c));
            drop_messages(ch, ch->n_msgs - 1);
            return 0;
        }
        fprintf(stderr, "llamaweb chat: the context (%u cells) is full: starting over with the system prompt\n",
                lw_context_n_ctx(ch->c));
        const char *last = ch->msgs[ch->n_msgs - 1].content;
        ch->msgs[ch->n_msgs - 1].content = NULL;
        drop_messages(ch, ch->n_keep);
        ch->msgs[ch->n_msgs++] = (lw_chat_message){"user", last};
        forget_cache(ch);
        restarted = 1;
    }

    /* decode the new part and generate the reply */
    size_t off = ch->kv_text.len;
    uint32_t past0 = lw_context_n_past(ch->c);
    if (!push_checkpoint(ch, off, past0) || !buf_append(&ch->kv_text, prompt + off, prompt_len - off)) {
        lw_chat_string_free(ch->tmpl, prompt);
        return 1;
    }
    lw_chat_string_free(ch->tmpl, prompt);
    ch->reply.len = 0;
    if (!buf_append(&ch->reply, "", 0)) return 1;
    ch->t_first = 0;
    double t0 = lw__cli_now();
    lw_generate_result r;
    lw_status st = lw_generate(ch->c, ch->s, ch->ids, n_ids, &ch->gp, &r);
    double t1 = lw__cli_now();
    fputc('\n', stdout);
    fflush(stdout);
    if (st != LW_OK) {
        fprintf(stderr, "llamaweb chat: %s\n", lw_context_error(ch->c));
        forget_cache(ch);
        drop_messages(ch, ch->n_msgs - 1);
        return 0;
    }
    /* The cache must hold the whole reply text: a reply cut short (length, callback) ends with a token that
     * was sampled but not decoded. An end-of-generation token stays out: the template writes its own end. */
    uint32_t past1 = past0 + (uint32_t)r.n_prompt;
    if (r.last >= 0 && r.stop != LW_STOP_EOG) {
        if (lw_context_n_past(ch->c) < lw_context_n_ctx(ch->c) && lw_decode(ch->c, &r.last, 1, 0) == LW_OK) {
        } else {
            ch->kv_text.len = 0; /* cannot hold it: the next turn starts over */
        }
    }
    if (ch->kv_text.len) {
        if (!push_checkpoint(ch, ch->kv_text.len, past1) || !buf_append(&ch->kv_text, ch->reply.p, ch->reply.len))
            return 1;
    } else {
        forget_cache(ch);
    }
    if (!add_message(ch, "assistant", ch->reply.p)) return 1;
    if (ch->verbose) {
        static const char *why[] = {"none", "end of generation", "length", "callback", "context full"};
        double tf = ch->t_first ? ch->t_first : t1;
        fprintf(stderr, "[turn: %d new prompt tokens from cell %u in %.1f ms, %d reply tokens in %.1f ms, stop: %s, "
                        "%u cells in use]\n",
                r.n_prompt, past0, 1e3 * (tf - t0), r.n_generated, 1e3 * (t1 - tf), why[r.stop],
                lw_context_n_past(ch->c));
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
    fprintf(stderr, "commands: /reset (start over), /quit\n");
    return 2;
}

int lw__cmd_chat(int argc, char **argv) {
    const char *model_path = NULL, *system = NULL;
    lw__cli_gen o;
    lw__cli_gen_defaults(&o);
    chat ch;
    memset(&ch, 0, sizeof ch);
    ch.gp = lw_generate_default_params();
    ch.gp.n_predict = -1;
    uint32_t n_ctx = 0;
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
        else if (!strcmp(a, "--system") && v) system = v, i++;
        else if (!strcmp(a, "-n") && v) ch.gp.n_predict = atoi(v), i++;
        else if (!strcmp(a, "--ctx") && v) n_ctx = (uint32_t)strtoul(v, NULL, 10), i++;
        else if (!strcmp(a, "-v") || !strcmp(a, "--verbose")) ch.verbose = 1;
        else return chat_usage();
    }
    if (!model_path) return chat_usage();

    int rc = 1;
    char *line = NULL;
    size_t line_cap = 0;
    double t0 = lw__cli_now();
    if (lw__cli_load_model("chat", model_path, &ch.m)) return 1;
    if (!(ch.v = lw_model_vocab(ch.m))) {
        lw_model_tokenize(ch.m, "", 0, 0, 0, NULL, 0, &(size_t){0}); /* leaves the reason on the model */
        fprintf(stderr, "llamaweb chat: %s\n", lw_model_error(ch.m));
        goto done;
    }
    if (lw__cli_gen_context("chat", ch.m, &o, n_ctx, &ch.c, &ch.s)) goto done;
    ch.seed = o.sampler.seed;

    const char *tmpl = NULL;
    lw_chat_params_default(&ch.tp);
    int own = lw_chat_from_gguf(lw_model_gguf(ch.m), &tmpl, &ch.tp.bos_token, &ch.tp.eos_token) == LW_OK;
    char err[256];
    if (own && lw_chat_template_parse(tmpl, strlen(tmpl), NULL, &ch.tmpl, err, sizeof err) != LW_OK) {
        fprintf(stderr, "llamaweb chat: the model's chat template does not parse (%s): using the plain format\n", err);
        own = 0;
    }
    if (!own && lw_chat_template_parse(fallback_template, strlen(fallback_template), NULL, &ch.tmpl, err,
                                       sizeof err) != LW_OK) {
        fprintf(stderr, "llamaweb chat: %s\n", err); /* only when memory runs out */
        goto done;
    }
    fprintf(stderr, "llamaweb chat: %s, %d layers, context %u cells, %d threads, %s, load %.0f ms\n",
            lw_model_arch(ch.m), lw_model_n_layer(ch.m), lw_context_n_ctx(ch.c), lw_context_n_threads(ch.c),
            own ? "the model's chat template" : "no chat template: plain User:/Assistant: format",
            1e3 * (lw__cli_now() - t0));
    if (system && !add_message(&ch, "system", system)) goto done;
    ch.n_keep = ch.n_msgs;
    forget_cache(&ch);
    ch.gp.on_token = on_token;
    ch.gp.user = &ch;

    const int interactive = isatty(STDIN_FILENO);
    for (;;) {
        if (interactive) {
            fputs("> ", stdout);
            fflush(stdout);
        }
        ssize_t n = getline(&line, &line_cap, stdin);
        if (n < 0) break;
        while (n > 0 && (line[n - 1] == '\n' || line[n - 1] == '\r')) line[--n] = 0;
        if (n == 0) continue;
        if (!strcmp(line, "/quit") || !strcmp(line, "/exit")) break;
        if (!strcmp(line, "/reset")) {
            drop_messages(&ch, ch.n_keep);
            forget_cache(&ch);
            lw_sampler_reset(ch.s, ch.seed);
            if (interactive) fprintf(stderr, "[conversation reset]\n");
            continue;
        }
        if (turn(&ch, line)) {
            fprintf(stderr, "llamaweb chat: out of memory\n");
            goto done;
        }
    }
    if (interactive) fputc('\n', stdout);
    rc = 0;
done:
    free(line);
    drop_messages(&ch, 0);
    free(ch.msgs);
    free(ch.cps);
    free(ch.ids);
    free(ch.kv_text.p);
    free(ch.reply.p);
    lw_chat_template_free(ch.tmpl);
    lw__cli_gen_close(ch.m, ch.c, ch.s);
    return rc;
}
