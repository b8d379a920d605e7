/* Tokenizer throughput, llamaweb vs llama.cpp (libllama v0.4.0 through its C API, loaded with
 * tests/llama-oracle.h), on the same text and vocab, one thread, best of R runs each, alternating; also
 * checks both give the same ids.
 *   tokenize-speed VOCAB.gguf TEXT_FILE [R=3]
 * Built and run by bench/tokenize-speed.sh (which makes a 1 MB mixed-language text). */
#include "llama-oracle.h"
#include "tokenizer/tokenizer.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + t.tv_nsec * 1e-9;
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: tokenize-speed VOCAB.gguf TEXT_FILE [REPS]\n");
        return 2;
    }
    int reps = argc > 3 ? atoi(argv[3]) : 3;
    const char *why = llama_oracle_open();
    if (why) {
        fprintf(stderr, "%s\n", why);
        return 1;
    }
    /* llama_tokenize and llama_model_get_vocab are not in the oracle table: look them up in the same library.
     */
    char path[1024];
    snprintf(path, sizeof path, "%s/libllama.v0.4.0.so", LLAMA_ORACLE_DIR);
    void *h = dlopen(path, RTLD_NOW | RTLD_NOLOAD);
    const void *(*get_vocab)(const void *) =
        h ? (const void *(*)(const void *))dlsym(h, "llama_model_get_vocab") : NULL;
    int32_t (*tokenize)(const void *, const char *, int32_t, int32_t *, int32_t, bool, bool) =
        h ? (int32_t(*)(const void *, const char *, int32_t, int32_t *, int32_t, bool, bool))dlsym(
                h, "llama_tokenize")
          : NULL;
    if (!get_vocab || !tokenize) {
        fprintf(stderr, "libllama lacks llama_tokenize\n");
        return 1;
    }
    FILE *f = fopen(argv[2], "rb");
    if (!f) return 1;
    fseek(f, 0, SEEK_END);
    size_t len = (size_t)ftell(f);
    fseek(f, 0, SEEK_SET);
    char *text = malloc(len + 1);
    if (!text || fread(text, 1, len, f) != len) return 1;
    fclose(f);

    ll_model_params mp = ll.model_default_params();
    mp.vocab_only = true;
    void *model = ll.model_load_from_file(argv[1], mp);
    if (!model) {
        fprintf(stderr, "llama.cpp cannot load %s: %s\n", argv[1], llama_oracle_log);
        return 1;
    }
    const void *lv = get_vocab(model);
    lw_source *src;
    lw_gguf *g;
    lw_vocab *v;
    char err[256];
    if (lw_source_open_file(argv[1], NULL, &src, err, sizeof err) != LW_OK ||
        lw_gguf_open(src, NULL, &g) != LW_OK || lw_vocab_load(g, NULL, &v) != LW_OK) {
        fprintf(stderr, "llamaweb cannot load %s\n", argv[1]);
        return 1;
    }
    size_t cap = 4 * len + 16;
    int32_t *a = malloc(sizeof(int32_t) * cap), *b = malloc(sizeof(int32_t) * cap);
    double best_ll = 1e30, best_lw = 1e30;
    int32_t na = 0;
    size_t nb = 0;
    for (int r = 0; r < reps; r++) {
        double t0 = now_s();
        na = tokenize(lv, text, (int32_t)len, a, (int32_t)cap, false, false);
        double t1 = now_s();
        lw_tokenize(v, text, len, 0, 0, b, cap, &nb);
        double t2 = now_s();
        if (t1 - t0 < best_ll) best_ll = t1 - t0;
        if (t2 - t1 < best_lw) best_lw = t2 - t1;
    }
    int same = na >= 0 && (size_t)na == nb && !memcmp(a, b, nb * sizeof(int32_t));
    const char *name = strrchr(argv[1], '/');
    printf("| %s | %zu | %d | %.1f | %.1f | %.2fx | %s |\n", name ? name + 1 : argv[1], len, na,
           best_ll * 1e3, best_lw * 1e3, best_ll / best_lw, same ? "same" : "DIFFERENT");
    return same ? 0 : 1;
}
