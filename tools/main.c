/* llamaweb CLI entry point: dispatches to subcommands. */
#include "cli.h"

#include <stdio.h>
#include <string.h>

/* One subcommand: name, entry point, one-line help. Add new commands here (one line each). */
static const struct command {
    const char *name;               /* what the user types            */
    int (*run)(int argc, char **argv); /* argv[0] is the subcommand name */
    const char *help;               /* shown by `llamaweb help`       */
} commands[] = {
    {"info", lw__cmd_info, "info FILE.gguf [--json]    describe a GGUF file: metadata, tensors, sizes"},
    {"synth", lw__cmd_synth, "synth --preset P --type T -o OUT.gguf    random-weight model in a real shape (--list)"},
    {"run", lw__cmd_run, "run -m MODEL.gguf [-p TEXT | --tokens IDS] [-n N] [--temp T]   generate text (CPU)"},
    {"embed", lw__cmd_embed, "embed -m MODEL.gguf -p TEXT [-p TEXT]... [--pooling mean] [--normalize]   embeddings as JSON (CPU)"},
    {"chat", lw__cmd_chat, "chat -m MODEL.gguf [--system S] [-n N] [--temp T]   interactive chat on stdin/stdout (CPU)"},
    {"bench", lw__cmd_bench, "bench -m MODEL.gguf [-p 512] [-n 128] [-t 1,2]   prompt/generation tokens per second"},
    {"tokenize", lw__cmd_tokenize, "tokenize -m FILE.gguf TEXT  token ids and pieces of a text (--ids, --bench N, -f FILE)"},
    {"template", lw__cmd_template, "template -m FILE.gguf [-s S] [-u U] [-a A]...  render the chat template for a conversation (-t FILE.jinja)"},
    {"bench-kernels", lw__cmd_bench_kernels, "bench-kernels [--types q4_0,q8_0,..|all] [--n 4096] [--rows 4096]   mat-vec GB/s per format"},
};

static int usage(FILE *f) {
    fprintf(f, "usage: llamaweb COMMAND [ARGS]\n\ncommands:\n");
    for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++) fprintf(f, "  %s\n", commands[i].help);
    return f == stderr ? 2 : 0;
}

int main(int argc, char **argv) {
    if (argc < 2) return usage(stderr);
    if (!strcmp(argv[1], "help") || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) return usage(stdout);
    for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
        if (!strcmp(argv[1], commands[i].name)) return commands[i].run(argc - 1, argv + 1);
    fprintf(stderr, "llamaweb: unknown command '%s'\n", argv[1]);
    return usage(stderr);
}
