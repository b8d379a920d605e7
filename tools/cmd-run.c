/* `llamaweb run -m MODEL.gguf [-p TEXT | --tokens 1,403,407] [-n N] [--temp T] [--seed S] [--threads N] ...`:
 * generates text on the CPU engine. The prompt and the generated text go to stdout as they come, then one
 * line "ids: PROMPT | GENERATED"; load and speed figures go to stderr. With --temp 0 the output is greedy
 * and matches llama.cpp token for token. */
#include "cli.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_PROMPT 8192 /* prompt tokens we accept from --tokens or -p */

static int usage(void) {
    fprintf(stderr,
            "usage: llamaweb run -m MODEL.gguf [-p TEXT | --tokens ID,ID,...] [options]\n"
            "  -n N               tokens to generate (default 64)\n"
            "  --ctx N            context cells (default: prompt + n)\n"
            "  --ignore-eos       keep generating after an end-of-generation token\n");
    lw__cli_gen_usage(stderr);
    return 2;
}

/* Parses "1,403,407" into ids; returns the count or -1. */
static int parse_ids(const char *s, int32_t *ids, int cap) {
    int n = 0;
    while (*s) {
        char *end;
        long v = strtol(s, &end, 10);
        if (end == s || v < 0 || v > INT32_MAX || n >= cap) return -1;
        ids[n++] = (int32_t)v;
        s = end;
        if (*s == ',') s++;
        else if (*s) return -1;
    }
    return n;
}

/* Fallback text of a token when no tokenizer is available: the stored string with SentencePiece's U+2581
 * as a space and <0xNN> byte tokens as their byte. */
static void print_raw_token(lw_gguf *g, int32_t id) {
    lw_gguf_type t;
    uint64_t n;
    const void *data;
    if (lw_gguf_get_arr(g, "tokenizer.ggml.tokens", &t, &n, &data) != LW_OK || t != LW_GGUF_STRING || (uint64_t)id >= n) {
        printf("[%d]", id);
        return;
    }
    const lw_gguf_str *s = &((const lw_gguf_str *)data)[id];
    unsigned b;
    if (s->len == 6 && sscanf(s->s, "<0x%2X>", &b) == 1) {
        putchar((int)b);
        return;
    }
    for (uint64_t i = 0; i < s->len; i++) {
        if (i + 2 < s->len && (unsigned char)s->s[i] == 0xE2 && (unsigned char)s->s[i + 1] == 0x96 &&
            (unsigned char)s->s[i + 2] == 0x81) {
            putchar(' ');
            i += 2;
        } else {
            putchar(s->s[i]);
        }
    }
}

/* What the token callback needs: the model (raw token text without a vocabulary) and the first token's time. */
typedef struct run_state {
    lw_model *m;     /* the model                                  */
    double t_first;  /* when the first token came (s); 0: not yet */
} run_state;

static int on_token(void *user, int32_t token, const char *text, size_t len) {
    run_state *rs = user;
    if (rs->t_first == 0) rs->t_first = lw__cli_now();
    if (lw_model_vocab(rs->m))
        fwrite(text, 1, len, stdout);
    else if (token >= 0)
        print_raw_token(lw_model_gguf(rs->m), token);
    fflush(stdout);
    return 0;
}

int lw__cmd_run(int argc, char **argv) {
    const char *model_path = NULL, *prompt = NULL, *ids_arg = NULL;
    int n_gen = 64, ignore_eos = 0;
    uint32_t n_ctx = 0;
    lw__cli_gen o;
    lw__cli_gen_defaults(&o);
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        int used = lw__cli_gen_option(a, v, &o);
        if (used < 0) {
            fprintf(stderr, "llamaweb run: bad value for %s\n", a);
            return 2;
        }
        if (used > 0) {
            i += used - 1;
            continue;
        }
        used = 1;
        if (!strcmp(a, "-m") && v) model_path = v;
        else if (!strcmp(a, "-p") && v) prompt = v;
        else if (!strcmp(a, "--tokens") && v) ids_arg = v;
        else if (!strcmp(a, "-n") && v) n_gen = atoi(v);
        else if (!strcmp(a, "--ctx") && v) n_ctx = (uint32_t)strtoul(v, NULL, 10);
        else if (!strcmp(a, "--ignore-eos")) ignore_eos = 1, used = 0;
        else return usage();
        i += used;
    }
    if (!model_path || (!prompt && !ids_arg) || n_gen < 0 || n_gen > (1 << 24)) return usage();

    double t0 = lw__cli_now();
    lw_model *m = NULL;
    if (lw__cli_load_model_rows("run", model_path, &o.rows, 0, &m)) return 1;
    const lw_vocab *vocab = lw_model_vocab(m);
    if (!vocab) {
        lw_model_tokenize(m, "", 0, 0, 0, NULL, 0, &(size_t){0}); /* leaves the reason on the model */
        fprintf(stderr, "llamaweb run: %s; showing raw token strings\n", lw_model_error(m));
    }

    int rc = 1;
    lw_context *c = NULL;
    lw_sampler *smp = NULL;
    int32_t *ids = malloc(sizeof(int32_t) * ((size_t)MAX_PROMPT + (size_t)n_gen));
    if (!ids) goto done;
    int n_prompt;
    if (ids_arg) {
        n_prompt = parse_ids(ids_arg, ids, MAX_PROMPT);
        if (n_prompt <= 0) {
            fprintf(stderr, "llamaweb run: --tokens wants comma-separated ids\n");
            goto done;
        }
    } else {
        if (!vocab) {
            fprintf(stderr, "llamaweb run: -p needs a tokenizer; use --tokens\n");
            goto done;
        }
        size_t n = 0;
        if (lw_model_tokenize(m, prompt, strlen(prompt), 1, 0, ids, MAX_PROMPT, &n) != LW_OK || n == 0) {
            fprintf(stderr, "llamaweb run: tokenizing the prompt failed (%s)\n", lw_model_error(m));
            goto done;
        }
        n_prompt = (int)n;
    }
    if (lw__cli_gen_context("run", m, &o, n_ctx ? n_ctx : (uint32_t)(n_prompt + n_gen), &c, &smp)) goto done;
    double t1 = lw__cli_now();
    fprintf(stderr, "llamaweb run: %s, %d layers, %.1f MiB weights, context %u cells (%.1f MiB), %d threads, load %.0f ms\n",
            lw_model_arch(m), lw_model_n_layer(m), (double)lw_model_weight_bytes(m) / 1048576.0, lw_context_n_ctx(c),
            (double)lw_context_bytes(c) / 1048576.0, lw_context_n_threads(c), 1e3 * (t1 - t0));

    /* echo the prompt */
    if (vocab) {
        lw_detok_stream ds;
        lw_detok_stream_init(&ds, vocab, 0, 0);
        size_t cap = lw_detok_stream_max_out(&ds), np = 0;
        char *piece = malloc(cap);
        for (int i = 0; piece && i < n_prompt; i++)
            if (lw_detok_stream_push(&ds, ids[i], piece, cap, &np) == LW_OK) fwrite(piece, 1, np, stdout);
        if (piece && lw_detok_stream_flush(&ds, piece, cap, &np) == LW_OK) fwrite(piece, 1, np, stdout);
        free(piece);
    } else {
        for (int i = 0; i < n_prompt; i++) print_raw_token(lw_model_gguf(m), ids[i]);
    }
    fflush(stdout);

    run_state rs = {m, 0};
    lw_generate_params gp = lw_generate_default_params();
    gp.n_predict = n_gen;
    gp.ignore_eog = ignore_eos;
    gp.on_token = on_token;
    gp.user = &rs;
    gp.tokens = ids + n_prompt;
    gp.tokens_cap = (size_t)n_gen;
    lw_generate_result r;
    lw_status st = lw_generate(c, smp, ids, (size_t)n_prompt, &gp, &r);
    double t3 = lw__cli_now(), t2 = rs.t_first ? rs.t_first : t3;
    /* end the streamed text before anything else is printed, and let it out before the stderr figures */
    printf("\n");
    fflush(stdout);
    if (st != LW_OK) {
        fprintf(stderr, "llamaweb run: %s\n", lw_context_error(c));
        if (o.grammar && lw_grammar_error(o.grammar)[0]) /* e.g. the grammar allowed no token */
            fprintf(stderr, "llamaweb run: grammar: %s\n", lw_grammar_error(o.grammar));
        goto done;
    }
    int n = n_prompt + r.n_generated;
    if (o.tools_file && vocab) { /* the generated text (control tokens' text included, the final EOG not) */
        const int n_text = r.n_generated - (r.stop == LW_STOP_EOG);
        size_t cap = 64 + 256 * (size_t)(n_text > 0 ? n_text : 0), got = 0;
        char *text = malloc(cap);
        if (text && lw_model_detokenize(m, ids + n_prompt, (size_t)(n_text > 0 ? n_text : 0), 0, 1, text, cap, &got) == LW_OK)
            lw__cli_gen_tool_calls(&o, text, got);
        free(text);
    }
    printf("ids:");
    for (int i = 0; i < n; i++) printf(i == n_prompt ? " | %d" : " %d", ids[i]);
    printf("\n");
    fflush(stdout);
    /* the first token comes with the prompt; the speed of the others is one decode + one sample each */
    fprintf(stderr, "llamaweb run: prompt %d tokens in %.1f ms (%.1f t/s), generated %d tokens, %d after the first in "
                    "%.1f ms (%.1f t/s)\n",
            n_prompt, 1e3 * (t2 - t1), n_prompt / (t2 - t1 > 0 ? t2 - t1 : 1e-9), r.n_generated,
            r.n_generated > 0 ? r.n_generated - 1 : 0, 1e3 * (t3 - t2),
            (r.n_generated > 1 ? r.n_generated - 1 : 0) / (t3 - t2 > 0 ? t3 - t2 : 1e-9));
    lw__cli_rows_report("run", c);
    rc = 0;
done:
    free(ids);
    lw__cli_gen_close(m, c, smp);
    lw__cli_gen_free_grammar(&o);
    return rc;
}
