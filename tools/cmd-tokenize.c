/* `llamaweb tokenize -m FILE.gguf [options] [TEXT]`: token ids and pieces of a text, with the file's own
 * tokenizer (exactly as llama.cpp's llama_tokenize). Also a throughput measurement (--bench N). */
#include "cli.h"
#include "tokenizer/tokenizer.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static int tok_usage(void) {
    fprintf(stderr,
            "usage: llamaweb tokenize -m FILE.gguf [options] [TEXT]\n"
            "  -m FILE         model or vocabulary GGUF file\n"
            "  -f FILE         read the text from FILE ('-' = stdin) instead of the argument\n"
            "  --no-special    do not add BOS/EOS (llama_tokenize add_special = false)\n"
            "  --parse-special turn control-token texts like <|im_end|> into their ids\n"
            "  --ids           print only the ids, space-separated\n"
            "  --bench N       tokenize N times and print the throughput\n");
    return 2;
}

/* Reads a whole file (or stdin) into a malloc'd buffer. */
static char *slurp(const char *path, size_t *len) {
    FILE *f = strcmp(path, "-") ? fopen(path, "rb") : stdin;
    if (!f) return NULL;
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap);
    while (buf) {
        if (n == cap) {
            char *nb = realloc(buf, cap * 2);
            if (!nb) {
                free(buf);
                buf = NULL;
                break;
            }
            buf = nb, cap *= 2;
        }
        size_t r = fread(buf + n, 1, cap - n, f);
        if (r == 0) break;
        n += r;
    }
    if (f != stdin) fclose(f);
    *len = n;
    return buf;
}

/* Whether s[0..n) is well-formed UTF-8 (byte tokens of a split character are not). */
static int valid_utf8(const unsigned char *s, size_t n) {
    for (size_t i = 0; i < n;) {
        size_t l = s[i] < 0x80 ? 1 : (s[i] >> 5) == 6 ? 2 : (s[i] >> 4) == 14 ? 3 : (s[i] >> 3) == 30 ? 4 : 0;
        if (!l || i + l > n) return 0;
        for (size_t j = 1; j < l; j++)
            if ((s[i + j] & 0xC0) != 0x80) return 0;
        i += l;
    }
    return 1;
}

/* Prints a piece quoted, with control bytes (and all bytes >= 0x80 of an invalid piece) escaped. */
static void put_piece(const char *s, size_t n) {
    int raw_ok = valid_utf8((const unsigned char *)s, n);
    putchar('\'');
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c >= 0x80 && !raw_ok) {
            printf("\\x%02x", c);
            continue;
        }
        if (c == '\n') fputs("\\n", stdout);
        else if (c == '\t') fputs("\\t", stdout);
        else if (c == '\r') fputs("\\r", stdout);
        else if (c == '\'' || c == '\\') printf("\\%c", c);
        else if (c < 0x20 || c == 0x7f) printf("\\x%02x", c);
        else putchar(c);
    }
    putchar('\'');
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

int lw__cmd_tokenize(int argc, char **argv) {
    const char *model = NULL, *file = NULL, *text = NULL;
    int add_special = 1, parse_special = 0, ids_only = 0, bench = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-m") && i + 1 < argc) model = argv[++i];
        else if (!strcmp(argv[i], "-f") && i + 1 < argc) file = argv[++i];
        else if (!strcmp(argv[i], "--no-special")) add_special = 0;
        else if (!strcmp(argv[i], "--parse-special")) parse_special = 1;
        else if (!strcmp(argv[i], "--ids")) ids_only = 1;
        else if (!strcmp(argv[i], "--bench") && i + 1 < argc) bench = atoi(argv[++i]);
        else if (argv[i][0] == '-' && argv[i][1]) return tok_usage();
        else if (!text) text = argv[i];
        else return tok_usage();
    }
    if (!model || (!text && !file)) return tok_usage();

    size_t len = 0;
    char *owned = NULL;
    if (file) {
        owned = slurp(file, &len);
        if (!owned) {
            fprintf(stderr, "llamaweb tokenize: cannot read %s\n", file);
            return 1;
        }
        text = owned;
    } else {
        len = strlen(text);
    }

    int rc = 1;
    char err[256] = "";
    lw_source *src = NULL;
    lw_gguf *g = NULL;
    lw_vocab *v = NULL;
    int32_t *ids = NULL;
    if (lw_source_open_file(model, NULL, &src, err, sizeof(err)) != LW_OK) {
        fprintf(stderr, "llamaweb tokenize: %s\n", err);
        goto done;
    }
    if (lw_gguf_open(src, NULL, &g) != LW_OK) {
        fprintf(stderr, "llamaweb tokenize: %s: %s\n", model, g ? lw_gguf_error(g) : "out of memory");
        goto done;
    }
    if (lw_vocab_load(g, NULL, &v) != LW_OK) {
        fprintf(stderr, "llamaweb tokenize: %s: %s\n", model, v ? lw_vocab_error(v) : "out of memory");
        goto done;
    }
    size_t cap = len + 16, n = 0;
    ids = malloc(cap * sizeof(int32_t));
    if (!ids) goto done;
    lw_status st = lw_tokenize(v, text, len, add_special, parse_special, ids, cap, &n);
    if (st == LW_ERR_TOO_LARGE) { /* cannot happen (at most one id per byte + specials), but be exact */
        free(ids);
        cap = n;
        ids = malloc(cap * sizeof(int32_t));
        if (!ids) goto done;
        st = lw_tokenize(v, text, len, add_special, parse_special, ids, cap, &n);
    }
    if (st != LW_OK) {
        fprintf(stderr, "llamaweb tokenize: %s\n", lw_status_str(st));
        goto done;
    }
    if (bench > 0) {
        double best = 1e30;
        for (int r = 0; r < bench; r++) {
            double t0 = now_s();
            size_t m = 0;
            lw_tokenize(v, text, len, add_special, parse_special, ids, cap, &m);
            double dt = now_s() - t0;
            if (dt < best) best = dt;
        }
        printf("%zu bytes -> %zu tokens; best of %d: %.3f ms, %.2f MB/s, %.0f tokens/s\n", len, n, bench,
               best * 1e3, len / best / 1e6, n / best);
        rc = 0;
        goto done;
    }
    if (ids_only) {
        for (size_t i = 0; i < n; i++) printf(i ? " %d" : "%d", ids[i]);
        printf("\n");
    } else {
        char piece[4096];
        for (size_t i = 0; i < n; i++) {
            size_t pn = 0;
            lw_token_to_piece(v, ids[i], 1, 0, piece, sizeof(piece), &pn);
            printf("%6d -> ", ids[i]);
            put_piece(piece, pn < sizeof(piece) ? pn : sizeof(piece));
            printf("\n");
        }
        printf("%zu tokens\n", n);
    }
    rc = 0;
done:
    free(ids);
    free(owned);
    lw_vocab_free(v);
    lw_gguf_close(g);
    lw_source_close(src);
    return rc;
}
