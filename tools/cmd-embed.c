/* `llamaweb embed -m MODEL.gguf -p TEXT [-p TEXT ...] [--pooling mean] [--normalize]`: embeddings of texts
 * (llama.cpp's llama-embedding): the model's hidden states after the final norm, pooled per input and
 * optionally normalised, printed as one JSON object on stdout:
 *
 *   {"model": "m.gguf", "arch": "llama", "n_embd": 64, "pooling": "mean", "normalize": 2,
 *    "data": [{"index": 0, "n_tokens": 5, "embedding": [0.0123, ...]}, ...]}
 *
 * With --pooling none each input's "embedding" is a list of per-token vectors. Floats are printed with 9
 * significant digits (they read back as the same float). */
#include "cli.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_INPUTS 4096 /* -p texts and -f lines */

static int usage(void) {
    fprintf(
        stderr,
        "usage: llamaweb embed -m MODEL.gguf (-p TEXT)... [-f FILE] [options]\n"
        "  -p TEXT            an input (repeat for several)\n"
        "  -f FILE            one input per line of FILE (empty lines skipped)\n"
        "  --pooling P        none | mean | cls | last (default: the file's <arch>.pooling_type, else mean)\n"
        "  --normalize        L2-normalise each vector (--embd-normalize 2)\n"
        "  --embd-normalize N llama.cpp's embd_normalize: -1 none (default), 0 int16 range (max |x| = "
        "32760),\n"
        "                     1 taxicab, 2 Euclidean, >2 p-norm\n"
        "  --no-special       no BOS/EOS (default: the vocabulary's own, as llama-embedding)\n"
        "  --ctx N            context cells (default: the longest input)\n"
        "  --batch N          tokens per step (default 512; longer inputs take several)\n"
        "  --threads N, -t N  threads (default: online processors, at most 8)\n");
    return 2;
}

static const char *pooling_name(lw_pooling p) {
    switch (p) {
    case LW_POOLING_NONE:
        return "none";
    case LW_POOLING_MEAN:
        return "mean";
    case LW_POOLING_CLS:
        return "cls";
    case LW_POOLING_LAST:
        return "last";
    case LW_POOLING_RANK:
        return "rank";
    default:
        return "unspecified";
    }
}

static int parse_pooling(const char *s, lw_pooling *p) {
    static const lw_pooling all[] = {LW_POOLING_NONE, LW_POOLING_MEAN, LW_POOLING_CLS, LW_POOLING_LAST};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        if (!strcmp(s, pooling_name(all[i]))) {
            *p = all[i];
            return 1;
        }
    return 0;
}

/* Prints a JSON string (the model path). */
static void print_json_string(const char *s) {
    putchar('"');
    for (; *s; s++) {
        unsigned char ch = (unsigned char)*s;
        if (ch == '"' || ch == '\\')
            printf("\\%c", ch);
        else if (ch < 0x20)
            printf("\\u%04x", ch);
        else
            putchar(ch);
    }
    putchar('"');
}

static void print_vector(const float *v, int32_t n) {
    putchar('[');
    for (int32_t i = 0; i < n; i++) printf(i ? ", %.9g" : "%.9g", (double)v[i]);
    putchar(']');
}

/* Tokenizes text into a malloc'd array (*n ids); NULL with a message on failure. */
static int32_t *tokenize(lw_model *m, const char *text, int add_special, size_t *n) {
    const size_t len = strlen(text), cap = 4 * len + 2; /* lw_tokenize's bound */
    int32_t *ids = malloc(cap * sizeof(int32_t));
    if (!ids) return NULL;
    if (lw_model_tokenize(m, text, len, add_special, 1, ids, cap, n) != LW_OK) {
        fprintf(stderr, "llamaweb embed: %s\n", lw_model_error(m));
        free(ids);
        return NULL;
    }
    return ids;
}

int lw__cmd_embed(int argc, char **argv) {
    const char *model = NULL, *file = NULL;
    const char *texts[MAX_INPUTS];
    int n_texts = 0, add_special = 1, pooling_set = 0;
    lw_embed_params ep = lw_embed_default_params();
    long n_ctx = 0, n_batch = 512, n_threads = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "-m") && v)
            model = v, i++;
        else if (!strcmp(a, "-p") && v) {
            if (n_texts == MAX_INPUTS)
                return fprintf(stderr, "llamaweb embed: more than %d inputs\n", MAX_INPUTS), 2;
            texts[n_texts++] = v, i++;
        } else if (!strcmp(a, "-f") && v)
            file = v, i++;
        else if (!strcmp(a, "--pooling") && v) {
            if (!parse_pooling(v, &ep.pooling))
                return fprintf(stderr, "llamaweb embed: unknown pooling '%s'\n", v), 2;
            pooling_set = 1, i++;
        } else if (!strcmp(a, "--normalize"))
            ep.normalize = 2;
        else if (!strcmp(a, "--embd-normalize") && v)
            ep.normalize = atoi(v), i++;
        else if (!strcmp(a, "--no-special"))
            add_special = 0;
        else if (!strcmp(a, "--ctx") && v)
            n_ctx = atol(v), i++;
        else if (!strcmp(a, "--batch") && v)
            n_batch = atol(v), i++;
        else if ((!strcmp(a, "--threads") || !strcmp(a, "-t")) && v)
            n_threads = atol(v), i++;
        else if (!strcmp(a, "-h") || !strcmp(a, "--help"))
            return usage();
        else
            return fprintf(stderr, "llamaweb embed: unknown or incomplete option '%s'\n", a), usage();
    }
    if (!model || (n_texts == 0 && !file)) return usage();
    if (n_ctx < 0 || n_ctx > (1l << 24) || n_batch <= 0 || n_batch > (1l << 24) || n_threads < 0 ||
        n_threads > 256)
        return fprintf(stderr, "llamaweb embed: bad --ctx, --batch or --threads\n"), 2;
    char *fbuf = NULL;
    if (file) { /* one input per non-empty line */
        if (!(fbuf = lw__cli_read_file(file, NULL)))
            return fprintf(stderr, "llamaweb embed: cannot read %s\n", file), 1;
        for (char *line = strtok(fbuf, "\r\n"); line; line = strtok(NULL, "\r\n")) {
            if (n_texts == MAX_INPUTS) {
                free(fbuf);
                return fprintf(stderr, "llamaweb embed: more than %d inputs\n", MAX_INPUTS), 2;
            }
            texts[n_texts++] = line;
        }
    }

    int rc = 1;
    lw_model *m = NULL;
    lw_context *c = NULL;
    int32_t **ids = calloc((size_t)n_texts + 1, sizeof(int32_t *));
    size_t *lens = calloc((size_t)n_texts + 1, sizeof(size_t));
    float *out = NULL;
    if (!ids || !lens) goto done;
    if (lw__cli_load_model("embed", model, &m)) goto done;
    if (!lw_model_vocab(m)) {
        fprintf(stderr, "llamaweb embed: %s has no tokenizer this build reads\n", model);
        goto done;
    }
    /* the CLI's default pooling: the file's, else the mean (llama.cpp's API would give per-token vectors) */
    if (!pooling_set) {
        ep.pooling = lw_model_pooling(m);
        if (ep.pooling == LW_POOLING_UNSPECIFIED) ep.pooling = LW_POOLING_MEAN;
    }
    size_t longest = 0, total = 0;
    for (int i = 0; i < n_texts; i++) {
        if (!(ids[i] = tokenize(m, texts[i], add_special, &lens[i]))) goto done;
        if (lens[i] == 0) {
            fprintf(stderr, "llamaweb embed: input %d has no tokens\n", i);
            goto done;
        }
        if (lens[i] > longest) longest = lens[i];
        total += lens[i];
    }
    lw_context_params cp = lw_context_default_params();
    cp.embeddings = 1;
    cp.n_ctx = n_ctx ? (uint32_t)n_ctx : (uint32_t)(longest < (1u << 24) ? longest : (1u << 24));
    cp.n_batch = (uint32_t)n_batch;
    cp.n_threads = (int32_t)n_threads;
    if (lw_context_create(m, &cp, &c) != LW_OK) {
        fprintf(stderr, "llamaweb embed: %s\n", lw_context_error(c));
        goto done;
    }
    const int32_t E = lw_model_n_embd(m);
    const size_t per = ep.pooling == LW_POOLING_NONE ? longest : 1;
    if (!(out = malloc(per * (size_t)E * sizeof(float)))) goto done;

    printf("{\"model\": ");
    print_json_string(model);
    printf(", \"arch\": ");
    print_json_string(lw_model_arch(m));
    printf(", \"n_embd\": %d, \"pooling\": \"%s\", \"normalize\": %d, \"data\": [", E,
           pooling_name(ep.pooling), ep.normalize < -1 ? -1 : ep.normalize);
    const double t0 = lw__cli_now();
    for (int i = 0; i < n_texts; i++) {
        size_t n_out = 0;
        if (lw_embed(c, ids[i], (int32_t)lens[i], &ep, out, per * (size_t)E, &n_out) != LW_OK) {
            printf("]}\n");
            fprintf(stderr, "llamaweb embed: input %d: %s\n", i, lw_context_error(c));
            goto done;
        }
        printf("%s\n  {\"index\": %d, \"n_tokens\": %zu, \"embedding\": ", i ? "," : "", i, lens[i]);
        if (ep.pooling == LW_POOLING_NONE) {
            putchar('[');
            for (size_t t = 0; t < lens[i]; t++) {
                if (t) printf(",\n    ");
                print_vector(out + t * (size_t)E, E);
            }
            putchar(']');
        } else {
            print_vector(out, E);
        }
        putchar('}');
    }
    printf("\n]}\n");
    fprintf(stderr, "llamaweb embed: %d inputs, %zu tokens in %.1f ms\n", n_texts, total,
            1e3 * (lw__cli_now() - t0));
    rc = 0;
done:
    if (ids)
        for (int i = 0; i < n_texts; i++) free(ids[i]);
    free(ids);
    free(lens);
    free(out);
    free(fbuf);
    lw_context_free(c);
    lw_model_free(m);
    return rc;
}
