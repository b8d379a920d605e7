/* Tokenizer test vectors from llama.cpp (../shared/vocab/ggml-vocab-*.gguf with .inp/.out files): every
 * input is tokenized without BOS (as llama.cpp's test-tokenizer-0 and node-llama-cpp's
 * model.tokenize(text, false) do) and compared with llama.cpp's ids. Also checks that detokenizing gives
 * the input back where llama.cpp's tokenizers are lossless, and that streaming detokenization matches
 * one-shot detokenization. Prints "k/n match" per vocabulary. */
#include "test.h"

#include "tokenizer/tokenizer.h"

#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char *read_file(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc((size_t)n + 1);
    if (buf && fread(buf, 1, (size_t)n, f) != (size_t)n) {
        free(buf);
        buf = NULL;
    }
    fclose(f);
    if (buf) buf[n] = 0, *len = (size_t)n;
    return buf;
}

/* Splits the .inp text on "\n__ggml_vocab_test__\n" as tok_check.mjs does (a trailing separator without
 * its final newline is dropped from the last input). Returns the count; inputs point into text. */
static size_t split_inputs(char *text, size_t len, char **inp, size_t *inp_len, size_t max) {
    static const char sep[] = "\n__ggml_vocab_test__\n";
    const size_t sl = sizeof(sep) - 1;
    size_t n = 0;
    char *p = text, *end = text + len;
    while (n < max) {
        char *hit = NULL;
        for (char *q = p; q + sl <= end; q++)
            if (!memcmp(q, sep, sl)) {
                hit = q;
                break;
            }
        inp[n] = p;
        if (!hit) {
            inp_len[n] = (size_t)(end - p);
            const char *tail = "\n__ggml_vocab_test__";
            size_t tl = strlen(tail);
            if (inp_len[n] >= tl && !memcmp(p + inp_len[n] - tl, tail, tl)) inp_len[n] -= tl;
            n++;
            break;
        }
        inp_len[n++] = (size_t)(hit - p);
        p = hit + sl;
    }
    return n;
}

/* Whether the text can be recovered: not for WPM (it lowercases and drops accents and spaces). */
static int roundtrip_expected(const lw_vocab *v) {
    return lw_vocab_get_type(v) == LW_VOCAB_SPM || (lw_vocab_get_type(v) == LW_VOCAB_BPE);
}

/* `llamaweb tokenize --no-special --ids -f FILE` on one input must print llama.cpp's ids (when the CLI is
 * known through $LW_CLI). */
static void check_cli(const char *vocab, const char *text, size_t len, const int32_t *exp, size_t ne) {
    const char *cli = getenv("LW_CLI");
    if (!cli || !*cli) return;
    char in[1100], cmd[4096];
    snprintf(in, sizeof(in), "%s/tok-cli-input.txt", test_tmp_dir());
    FILE *f = fopen(in, "wb");
    if (!f) return;
    fwrite(text, 1, len, f);
    fclose(f);
    snprintf(cmd, sizeof(cmd), "'%s' tokenize -m '%s' --no-special --ids -f '%s'", cli, vocab, in);
    FILE *p = popen(cmd, "r");
    CHECK_MSG(p != NULL, "cannot run %s", cmd);
    if (!p) return;
    char out[8192] = "";
    size_t k = fread(out, 1, sizeof(out) - 1, p);
    out[k] = 0;
    CHECK_MSG(pclose(p) == 0, "%s failed", cmd);
    size_t n = 0;
    int same = 1;
    for (char *q = out;;) {
        char *e;
        long x = strtol(q, &e, 10);
        if (e == q) break;
        same &= n < ne && exp[n] == x;
        n++;
        q = e;
    }
    CHECK_MSG(same && n == ne, "CLI ids differ from llama.cpp's for %s: %s", vocab, out);
    remove(in);
}

static int test_vocab(const char *dir, const char *name, int *all_ok) {
    char path[1024], pin[1040], pout[1040];
    if (snprintf(path, sizeof(path), "%s/%s", dir, name) >= (int)sizeof(path) - 8) return 0;
    snprintf(pin, sizeof(pin), "%s.inp", path);
    snprintf(pout, sizeof(pout), "%s.out", path);
    size_t lin, lout;
    char *tin = read_file(pin, &lin), *tout = read_file(pout, &lout);
    if (!tin || !tout) {
        free(tin);
        free(tout);
        return 0;
    }
    lw_source *src = NULL;
    lw_gguf *g = NULL;
    lw_vocab *v = NULL;
    char err[256] = "";
    lw_status st = lw_source_open_file(path, NULL, &src, err, sizeof(err));
    CHECK_MSG(st == LW_OK, "%s: %s", path, err);
    if (st == LW_OK) {
        st = lw_gguf_open(src, NULL, &g);
        CHECK_MSG(st == LW_OK, "%s: %s", path, g ? lw_gguf_error(g) : "?");
    }
    if (st == LW_OK) {
        st = lw_vocab_load(g, NULL, &v);
        CHECK_MSG(st == LW_OK, "%s: %s", name, lw_vocab_error(v));
    }
    if (st == LW_OK) {
        enum { MAXIN = 512 };
        char *inp[MAXIN];
        size_t inp_len[MAXIN];
        size_t n = split_inputs(tin, lin, inp, inp_len, MAXIN), ok = 0, rt_ok = 0, rt_n = 0, shown = 0;
        char *line = tout;
        int32_t *ids = malloc(65536 * sizeof(int32_t)), *exp = malloc(65536 * sizeof(int32_t));
        char *detok = malloc(1 << 20), *streamed = malloc(1 << 20), *chunk = malloc(1 << 16);
        for (size_t i = 0; i < n; i++) {
            /* expected ids: one line of .out */
            char *nl = line ? strchr(line, '\n') : NULL;
            if (nl) *nl = 0;
            size_t ne = 0;
            for (char *q = line; q && *q;) {
                char *e;
                long x = strtol(q, &e, 10);
                if (e == q) break;
                exp[ne++] = (int32_t)x;
                q = e;
            }
            line = nl ? nl + 1 : NULL;
            if (i == n / 2) check_cli(path, inp[i], inp_len[i], exp, ne);
            size_t nt = 0;
            st = lw_tokenize(v, inp[i], inp_len[i], 0, 0, ids, 65536, &nt);
            int same = st == LW_OK && nt == ne && !memcmp(ids, exp, ne * sizeof(int32_t));
            ok += same;
            if (!same && shown < 3) {
                shown++;
                fprintf(stderr, "  %s #%zu MISMATCH input '%.*s'\n    exp:", name, i, (int)inp_len[i], inp[i]);
                for (size_t j = 0; j < ne; j++) fprintf(stderr, " %d", exp[j]);
                fprintf(stderr, "\n    got:");
                for (size_t j = 0; j < nt && j < 200; j++) fprintf(stderr, " %d", ids[j]);
                fprintf(stderr, "\n");
            }
            if (st != LW_OK) continue;
            /* one-shot detokenize and streaming detokenize must agree (streaming does no space clean-up,
             * so compare against a detokenize of a vocabulary-independent form: concatenated pieces) */
            size_t dn = 0, sn = 0;
            lw_status ds = lw_detokenize(v, ids, nt, 0, 0, detok, 1 << 20, &dn);
            CHECK(ds == LW_OK);
            lw_detok_stream ss;
            lw_detok_stream_init(&ss, v, 0, 0);
            size_t pieces_len = 0;
            char *pieces = malloc(1 << 20);
            for (size_t j = 0; j < nt; j++) {
                size_t cn = 0, pn = 0;
                CHECK(lw_detok_stream_push(&ss, ids[j], chunk, 1 << 16, &cn) == LW_OK);
                memcpy(streamed + sn, chunk, cn);
                sn += cn;
                CHECK(lw_token_to_piece(v, ids[j], 0, 0, pieces + pieces_len, (1 << 20) - pieces_len, &pn) == LW_OK);
                pieces_len += pn;
            }
            size_t cn = 0;
            CHECK(lw_detok_stream_flush(&ss, chunk, 1 << 16, &cn) == LW_OK);
            memcpy(streamed + sn, chunk, cn);
            sn += cn;
            /* when the concatenated pieces are valid UTF-8 (every test input is), streaming gives them exactly */
            CHECK_MSG(sn == pieces_len && !memcmp(streamed, pieces, sn), "%s #%zu streamed text differs", name, i);
            if (roundtrip_expected(v) && same) {
                /* SPM: detokenize drops the prefix space the tokenizer added, giving the input back.
                 * Byte-level BPE: the pieces are the input's bytes (detokenize may still clean spaces). */
                int back = lw_vocab_get_type(v) == LW_VOCAB_SPM
                               ? dn == inp_len[i] && !memcmp(detok, inp[i], dn)
                               : pieces_len == inp_len[i] && !memcmp(pieces, inp[i], pieces_len);
                CHECK_MSG(back, "%s #%zu: text does not round-trip", name, i);
                rt_n++;
                rt_ok += back;
            }
            free(pieces);
        }
        printf("%s: %zu/%zu match", name, ok, n);
        if (rt_n) printf(", detokenize round trip %zu/%zu", rt_ok, rt_n);
        printf("\n");
        if (ok != n) *all_ok = 0;
        free(ids);
        free(exp);
        free(detok);
        free(streamed);
        free(chunk);
    } else {
        *all_ok = 0;
    }
    lw_vocab_free(v);
    lw_gguf_close(g);
    lw_source_close(src);
    free(tin);
    free(tout);
    return 1;
}

static int cmp_str(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

int main(void) {
    char dir[1024];
    snprintf(dir, sizeof(dir), "%s/vocab", test_shared_dir());
    DIR *d = opendir(dir);
    if (!d) {
        char why[1200];
        snprintf(why, sizeof(why), "no vocab folder %s (set LW_SHARED)", dir);
        test_skip(why);
    }
    char *names[256];
    size_t n = 0;
    struct dirent *e;
    while ((e = readdir(d)) && n < 256) {
        size_t l = strlen(e->d_name);
        if (!strncmp(e->d_name, "ggml-vocab-", 11) && l > 5 && !strcmp(e->d_name + l - 5, ".gguf"))
            names[n++] = strdup(e->d_name);
    }
    closedir(d);
    if (!n) test_skip("no ggml-vocab-*.gguf files");
    qsort(names, n, sizeof(char *), cmp_str);
    int all_ok = 1, tested = 0;
    for (size_t i = 0; i < n; i++) {
        tested += test_vocab(dir, names[i], &all_ok);
        free(names[i]);
    }
    CHECK(tested > 0);
    CHECK_MSG(all_ok, "some vocabularies do not match llama.cpp");
    return test_summary("test-tokenizer-vectors");
}
