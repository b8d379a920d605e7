/* `llamaweb synth --preset P --type T [--vocab V.gguf|builtin] [--seed S] [--pure] [--layers N]
 *  [--vocab-size N] [--chat-template FILE] [--threads N] -o out.gguf`:
 * writes a model with random weights in a real architecture's shape (see src/synth/synth.h). `--list` shows
 * the presets and types. */
#include "cli.h"
#include "synth/synth.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static int synth_usage(FILE *f) {
    fprintf(
        f, "usage: llamaweb synth --preset P --type T [--vocab V.gguf|builtin] [--seed S] [--pure]\n"
           "                      [--layers N] [--vocab-size N] [--chat-template FILE] [--threads N]\n"
           "                      -o OUT.gguf\n"
           "       llamaweb synth --list          presets and types\n"
           "  --vocab       tokenizer copied from a vocab GGUF (default: ../shared llama-spm, else builtin)\n"
           "  --vocab-size  built-in byte vocab padded to N tokens (e.g. 128256 as Llama 3)\n"
           "  --seed        random seed (default 1; same seed, same file)\n"
           "  --pure        one type for every 2-D weight (llama-quantize --pure)\n"
           "  --layers      this many blocks instead of the preset's\n"
           "  --chat-template  tokenizer.chat_template from a Jinja file (replaces the vocab's)\n"
           "  --threads     quantizing threads (default: online CPUs; the file is the same for any count)\n");
    return f == stderr ? 2 : 0;
}

static void list(void) {
    printf("presets:\n");
    for (size_t i = 0; lw__synth_preset_at(i); i++)
        printf("  %-14s %s\n", lw__synth_preset_at(i)->name, lw__synth_preset_at(i)->about);
    printf("types (llama.cpp file types, per-tensor rules of llama-quantize):\n ");
    for (size_t i = 0; lw__synth_ftype_at(i); i++)
        if (lw__synth_ftype_at(i)->mix) printf(" %s", lw__synth_ftype_at(i)->name);
    printf("\ntypes (one type for every 2-D weight):\n ");
    for (size_t i = 0; lw__synth_ftype_at(i); i++)
        if (!lw__synth_ftype_at(i)->mix) printf(" %s", lw__synth_ftype_at(i)->name);
    printf("\n");
}

int lw__cmd_synth(int argc, char **argv) {
    /* quantizing is most of the time (an 8B Q4_K_M takes minutes per core): every CPU by default */
    const long n_cpu = sysconf(_SC_NPROCESSORS_ONLN);
    lw__synth_params p = {.seed = 1, .n_threads = n_cpu < 1 ? 1 : n_cpu > 512 ? 512 : (int)n_cpu};
    char *tmpl = NULL; /* --chat-template file contents */
    const char *out = NULL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--list")) {
            free(tmpl);
            list();
            return 0;
        } else if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            free(tmpl);
            return synth_usage(stdout);
        } else if (!strcmp(a, "--pure")) {
            p.pure = 1;
        } else if (v && !strcmp(a, "--preset")) {
            p.preset = v, i++;
        } else if (v && !strcmp(a, "--type")) {
            p.type = v, i++;
        } else if (v && !strcmp(a, "--vocab")) {
            p.vocab_path = v, i++;
        } else if (v && !strcmp(a, "--chat-template")) {
            free(tmpl);
            if (!(tmpl = lw__cli_read_file(v, NULL))) {
                fprintf(stderr, "llamaweb synth: cannot read %s\n", v);
                return 1;
            }
            p.chat_template = tmpl, i++;
        } else if (v && (!strcmp(a, "-o") || !strcmp(a, "--output"))) {
            out = v, i++;
        } else if (v && (!strcmp(a, "--seed") || !strcmp(a, "--layers") || !strcmp(a, "--vocab-size") ||
                         !strcmp(a, "--threads") || !strcmp(a, "-t"))) {
            char *end;
            unsigned long long n = strtoull(v, &end, 0);
            const int threads = !strcmp(a, "--threads") || !strcmp(a, "-t");
            if (!*v || *end || (a[2] == 'l' && (n == 0 || n > 512)) ||
                (a[2] == 'v' && (n < 259 || n > LW_SYNTH_MAX_VOCAB)) || (threads && (n == 0 || n > 512))) {
                fprintf(stderr, "llamaweb synth: bad value for %s: '%s'\n", a, v);
                free(tmpl);
                return 2;
            }
            if (threads)
                p.n_threads = (int)n;
            else if (a[2] == 's')
                p.seed = n;
            else if (a[2] == 'l')
                p.n_layer = (uint32_t)n;
            else
                p.n_vocab = (int64_t)n;
            i++;
        } else {
            fprintf(stderr, "llamaweb synth: unknown or incomplete option '%s'\n", a);
            free(tmpl);
            return synth_usage(stderr);
        }
    }
    if (!p.preset || !p.type || !out) {
        free(tmpl);
        return synth_usage(stderr);
    }
    p.shared_dir = getenv("LW_SHARED");

    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    lw__synth_result r;
    char err[LW_ERRMSG_SIZE];
    lw_status rc = lw__synth_write(&p, out, NULL, &r, err);
    free(tmpl);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    if (rc != LW_OK) {
        fprintf(stderr, "llamaweb synth: %s\n", err);
        return 1;
    }
    double s = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
    printf("%s: preset %s, type %s%s, seed %" PRIu64 ", vocab %" PRId64 " tokens (%s)\n", out, p.preset,
           p.type, p.pure ? " (pure)" : "", p.seed, r.n_vocab, r.vocab_from);
    printf("%" PRIu64 " tensors, %" PRIu64 " parameters, %.1f MB of tensor data, ", r.n_tensors, r.n_params,
           (double)r.n_bytes / 1e6);
    printf("written in %.2f s (%d threads)\n", s, p.n_threads);
    return 0;
}
