/* The llamaweb CLI: one file per subcommand (tools/cmd-*.c), each exporting one entry point registered in
 * the table in tools/main.c. Entry points get argv without the program name (argv[0] is the subcommand). */
#ifndef LW_CLI_H
#define LW_CLI_H

#include "llamaweb.h"

#include <stddef.h>
#include <stdio.h>

int lw__cmd_info(int argc, char **argv);
int lw__cmd_bench_kernels(int argc, char **argv);
int lw__cmd_synth(int argc, char **argv);
int lw__cmd_run(int argc, char **argv);
int lw__cmd_bench(int argc, char **argv);
int lw__cmd_tokenize(int argc, char **argv);
int lw__cmd_template(int argc, char **argv);
int lw__cmd_chat(int argc, char **argv);
int lw__cmd_embed(int argc, char **argv);

/* A whole file, NUL-terminated, malloc'd (free() it); NULL when it cannot be read. len may be NULL. */
char *lw__cli_read_file(const char *path, size_t *len);

/* Options shared by the generating commands, run and chat (tools/cli-gen.c). */
/* The row store options (lw_model_params.rows_*). */
typedef struct lw__cli_rows {
    uint32_t embd;      /* --rows-embd N: token embedding rows in memory (0: all)                  */
    uint32_t per_layer; /* --rows-per-layer N: per-layer embedding rows in memory (gemma4; 0: all)  */
    uint32_t experts;   /* --rows-experts E: MoE experts of each layer in memory (0: all)          */
    const char *dir;    /* --rows-dir DIR: where row files go (NULL: the library's default)        */
} lw__cli_rows;

typedef struct lw__cli_gen {
    lw_sampler_params sampler; /* --temp --top-k --top-p --min-p --repeat-penalty --repeat-last-n --seed */
    int32_t n_threads;         /* --threads / -t (0: the context's default)                            */
    uint32_t kv;               /* --kv f16|f32|q8_0|q4_0                                               */
    int flash_attn;            /* 0 with --no-flash-attn                                               */
    const char *grammar_file;  /* --grammar FILE (GBNF)                                                */
    const char *schema_file;   /* --json-schema FILE                                                   */
    int json;                  /* --json: any JSON value                                               */
    const char *tools_file;    /* --tools FILE: OpenAI tools array; replies are parsed for tool calls  */
    const char *tool_choice;   /* --tool-choice auto (default: parse only) | required | NAME (grammar) */
    int tool_format;           /* --tool-format: lw_tool_format (AUTO: from the model's chat template)  */
    int parallel_tools;        /* 0 with --no-parallel-tool-calls: one call per reply                  */
    lw_grammar *grammar;       /* made by lw__cli_gen_context from the options above; freed by _close  */
    lw__cli_rows rows;         /* --rows-embd / -per-layer / -experts / -dir (row store)          */
} lw__cli_gen;

void lw__cli_gen_defaults(lw__cli_gen *o);
/* Help lines of those options. */
void lw__cli_gen_usage(FILE *f);
/* Parses option a (with its value v, NULL when a is the last argument): the argv entries used (1 or 2), 0
 * when a is not one of these options, -1 for a missing or bad value. */
int lw__cli_gen_option(const char *a, const char *v, lw__cli_gen *o);
/* The KV cache type a --kv value names (f16, f32, q8_0, q4_0), UINT32_MAX for anything else or NULL. */
uint32_t lw__cli_kv_type(const char *v);
/* Loads a model; on failure prints "llamaweb CMD: why" and returns 1 (*m NULL). */
int lw__cli_load_model(const char *cmd, const char *path, lw_model **m);
/* The same with the row store options (NULL or all 0: none); prints what the store did, or why a table is
 * resident instead, once on stderr. */
int lw__cli_load_model_rows(const char *cmd, const char *path, const lw__cli_rows *rows, int no_vocab,
                            lw_model **m);
/* With the row store in use: "llamaweb CMD: row cache TABLE: H hits, M misses (R % hits), ..." on stderr, a
 * line per table it serves. */
void lw__cli_rows_report(const char *cmd, const lw_context *c);
/* Parses --rows-embd / --rows-per-layer / --rows-experts / --rows-dir as lw__cli_gen_option does (used
 * entries, 0, -1). */
int lw__cli_rows_option(const char *a, const char *v, lw__cli_rows *rows);
/* Creates the context (n_ctx cells, 0: the model's default) and the sampler; prints why and returns 1 on
 * failure (free what was made with lw__cli_gen_close). */
int lw__cli_gen_context(const char *cmd, lw_model *m, lw__cli_gen *o, uint32_t n_ctx, lw_context **c,
                        lw_sampler **s);
void lw__cli_gen_close(lw_model *m, lw_context *c, lw_sampler *s);
/* With --tools: parses a reply for tool calls and prints "tool_calls: [OpenAI tool_calls JSON]" on stdout. */
void lw__cli_gen_tool_calls(const lw__cli_gen *o, const char *text, size_t len);
/* Frees the grammar of --grammar / --json-schema / --json (after lw__cli_gen_close). */
void lw__cli_gen_free_grammar(lw__cli_gen *o);
/* Monotonic time in seconds. */
double lw__cli_now(void);

#endif
