/* `llamaweb run -m MODEL.gguf [-p TEXT | --tokens 1,403,407] [-n N] [--temp T] [--seed S] [--threads N] ...`:
 * generates text on the CPU engine. The prompt and the generated text go to stdout as they come, then one
 * line "ids: PROMPT | GENERATED"; load and speed figures go to stderr. With --temp 0 the output is greedy
 * and matches llama.cpp token for token. */
#include "cli.h"
#include "model/engine.h"
#include "sample/sample.h"
#include "tokenizer/tokenizer.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAX_PROMPT 8192 /* prompt tokens we accept from --tokens or -p */

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int usage(void) {
    fprintf(stderr,
            "usage: llamaweb run -m MODEL.gguf [-p TEXT | --tokens ID,ID,...] [options]\n"
            "  -n N               tokens to generate (default 64)\n"
            "  --temp T           temperature, 0 = greedy (default 0.8)\n"
            "  --top-k K          (default 40, 0 = off)     --top-p P   (default 0.95)\n"
            "  --min-p P          (default 0.05)            --repeat-penalty R (default 1.0)\n"
            "  --repeat-last-n N  (default 64)              --seed S    (default 0x5eed)\n"
            "  --threads N, -t N  (default: online CPUs, at most 8)\n"
            "  --ctx N            context cells (default: prompt + n)\n"
            "  --kv f16|f32       KV cache type (default f16, as llama.cpp)\n"
            "  --no-flash-attn    attention as llama.cpp with flash attention off\n"
            "  --ignore-eos       keep generating after an end-of-generation token\n");
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

int lw__cmd_run(int argc, char **argv) {
    const char *model_path = NULL, *prompt = NULL, *ids_arg = NULL;
    int n_gen = 64, n_threads = 0, ignore_eos = 0, flash_attn = 1;
    uint32_t n_ctx = 0, kv = LW_TYPE_F16;
    lw_sampler_params sp = lw_sampler_default_params();
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        int used = 1;
        if (!strcmp(a, "-m") && v) model_path = v;
        else if (!strcmp(a, "-p") && v) prompt = v;
        else if (!strcmp(a, "--tokens") && v) ids_arg = v;
        else if (!strcmp(a, "-n") && v) n_gen = atoi(v);
        else if (!strcmp(a, "--temp") && v) sp.temp = strtof(v, NULL);
        else if (!strcmp(a, "--top-k") && v) sp.top_k = atoi(v);
        else if (!strcmp(a, "--top-p") && v) sp.top_p = strtof(v, NULL);
        else if (!strcmp(a, "--min-p") && v) sp.min_p = strtof(v, NULL);
        else if (!strcmp(a, "--repeat-penalty") && v) sp.penalty_repeat = strtof(v, NULL);
        else if (!strcmp(a, "--repeat-last-n") && v) sp.penalty_last_n = atoi(v);
        else if (!strcmp(a, "--seed") && v) sp.seed = strtoull(v, NULL, 0);
        else if ((!strcmp(a, "--threads") || !strcmp(a, "-t")) && v) n_threads = atoi(v);
        else if (!strcmp(a, "--ctx") && v) n_ctx = (uint32_t)strtoul(v, NULL, 10);
        else if (!strcmp(a, "--kv") && v && (!strcmp(v, "f16") || !strcmp(v, "f32"))) kv = !strcmp(v, "f16") ? LW_TYPE_F16 : LW_TYPE_F32;
        else if (!strcmp(a, "--ignore-eos")) ignore_eos = 1, used = 0;
        else if (!strcmp(a, "--no-flash-attn")) flash_attn = 0, used = 0;
        else return usage();
        i += used;
    }
    if (!model_path || (!prompt && !ids_arg) || n_gen < 0 || n_gen > (1 << 24)) return usage();

    double t0 = now_s();
    lw_model *m = NULL;
    if (lw_model_load_file(model_path, NULL, &m) != LW_OK) {
        fprintf(stderr, "llamaweb run: %s\n", lw_model_error(m));
        lw_model_free(m);
        return 1;
    }
    lw_vocab *vocab = NULL;
    if (lw_vocab_load(lw_model_gguf(m), NULL, &vocab) != LW_OK) {
        fprintf(stderr, "llamaweb run: no tokenizer (%s); showing raw token strings\n", lw_vocab_error(vocab));
        lw_vocab_free(vocab);
        vocab = NULL;
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
        if (lw_tokenize(vocab, prompt, strlen(prompt), 1, 0, ids, MAX_PROMPT, &n) != LW_OK || n == 0) {
            fprintf(stderr, "llamaweb run: tokenizing the prompt failed (%s)\n", lw_vocab_error(vocab));
            goto done;
        }
        n_prompt = (int)n;
    }

    lw_context_params cp = lw_context_default_params();
    cp.n_ctx = n_ctx ? n_ctx : (uint32_t)(n_prompt + n_gen);
    cp.n_threads = n_threads;
    cp.type_k = cp.type_v = kv;
    cp.flash_attn = flash_attn;
    if (lw_context_create(m, &cp, &c) != LW_OK) {
        fprintf(stderr, "llamaweb run: %s\n", lw_context_error(c));
        goto done;
    }
    if (lw_sampler_create(lw_model_n_vocab(m), &sp, NULL, &smp) != LW_OK) goto done;
    double t1 = now_s();
    fprintf(stderr, "llamaweb run: %s, %d layers, %.1f MiB weights, context %u cells (%.1f MiB), %d threads, load %.0f ms\n",
            lw_model_arch(m), lw_model_n_layer(m), (double)lw_model_weight_bytes(m) / 1048576.0, lw_context_n_ctx(c),
            (double)lw_context_bytes(c) / 1048576.0, lw_context_n_threads(c), 1e3 * (t1 - t0));

    /* echo the prompt */
    lw_detok_stream ds;
    char piece[512];
    size_t np = 0;
    if (vocab) {
        lw_detok_stream_init(&ds, vocab, 0, 0);
        for (int i = 0; i < n_prompt; i++)
            if (lw_detok_stream_push(&ds, ids[i], piece, sizeof(piece), &np) == LW_OK) fwrite(piece, 1, np, stdout);
    } else {
        for (int i = 0; i < n_prompt; i++) print_raw_token(lw_model_gguf(m), ids[i]);
    }
    fflush(stdout);
    for (int i = 0; i < n_prompt; i++) lw_sampler_accept(smp, ids[i]);

    if (lw_decode(c, ids, n_prompt, 0) != LW_OK) {
        fprintf(stderr, "\nllamaweb run: %s\n", lw_context_error(c));
        goto done;
    }
    double t2 = now_s();
    int n = n_prompt;
    for (int s = 0; s < n_gen; s++) {
        int32_t id = lw_sampler_sample(smp, lw_get_logits(c, -1));
        lw_sampler_accept(smp, id);
        ids[n++] = id;
        if (vocab) {
            if (lw_detok_stream_push(&ds, id, piece, sizeof(piece), &np) == LW_OK) fwrite(piece, 1, np, stdout);
        } else {
            print_raw_token(lw_model_gguf(m), id);
        }
        fflush(stdout);
        if (!ignore_eos && vocab && lw_vocab_is_eog(vocab, id)) break;
        if (s + 1 < n_gen && lw_decode(c, &id, 1, 0) != LW_OK) {
            fprintf(stderr, "\nllamaweb run: %s\n", lw_context_error(c));
            goto done;
        }
    }
    if (vocab && lw_detok_stream_flush(&ds, piece, sizeof(piece), &np) == LW_OK) fwrite(piece, 1, np, stdout);
    double t3 = now_s();
    printf("\nids:");
    for (int i = 0; i < n; i++) printf(i == n_prompt ? " | %d" : " %d", ids[i]);
    printf("\n");
    fprintf(stderr, "llamaweb run: prompt %d tokens in %.1f ms (%.1f t/s), generated %d tokens in %.1f ms (%.1f t/s)\n",
            n_prompt, 1e3 * (t2 - t1), n_prompt / (t2 - t1), n - n_prompt, 1e3 * (t3 - t2),
            (n - n_prompt) / (t3 - t2 > 0 ? t3 - t2 : 1e-9));
    rc = 0;
done:
    free(ids);
    lw_sampler_free(smp);
    lw_context_free(c);
    lw_vocab_free(vocab);
    lw_model_free(m);
    return rc;
}
