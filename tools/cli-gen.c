/* Options shared by the generating commands (`run`, `chat`): sampling, threads, context, KV cache type; and
 * the model + context + sampler set-up they share. */
#include "cli.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

void lw__cli_gen_defaults(lw__cli_gen *o) {
    memset(o, 0, sizeof *o);
    o->sampler = lw_sampler_default_params();
    o->kv = LW_TYPE_F16;
    o->flash_attn = 1;
    o->parallel_tools = 1;
}

void lw__cli_gen_usage(FILE *f) {
    fprintf(f, "  --temp T           temperature, 0 = greedy (default 0.8)\n"
               "  --top-k K          (default 40, 0 = off)     --top-p P   (default 0.95)\n"
               "  --min-p P          (default 0.05)            --repeat-penalty R (default 1.0)\n"
               "  --repeat-last-n N  (default 64)              --seed S    (default 0x5eed)\n"
               "  --threads N, -t N  (default: online CPUs, at most 8)\n"
               "  --kv T             KV cache type: f16 (default, as llama.cpp), f32, q8_0, q4_0 (these two\n"
               "                     need flash attention and head sizes that are multiples of 32)\n"
               "  --no-flash-attn    attention as llama.cpp with flash attention off\n"
               "  --grammar FILE     constrain the output to a GBNF grammar (llama.cpp's dialect)\n"
               "  --json-schema FILE constrain the output to JSON valid for a JSON Schema\n"
               "  --json             constrain the output to one JSON value\n"
               "  --tools FILE       OpenAI tools array (JSON): the chat template shows them (chat), replies are\n"
               "                     parsed for tool calls, printed as 'tool_calls: [...]' (OpenAI's objects)\n"
               "  --tool-choice C    auto (default: free text, parsed), required (one or more calls, by grammar)\n"
               "                     or a function's name (calls of that one)\n"
               "  --tool-format F    auto (the chat template's) | hermes | llama3 | mistral\n"
               "  --no-parallel-tool-calls   at most one call per reply\n"
               "  --rows-embd N      keep N rows of the token embedding table in memory (row store: the rest\n"
               "                     are read from a row file when used; identical output; 0 = all, default)\n"
               "  --rows-per-layer N the same for Gemma 4's per-layer embedding table (per_layer_token_embd)\n"
               "  --rows-experts E   keep E experts of each MoE layer in memory (the rest read when routed to)\n"
               "  --rows-dir DIR     row files' directory (default $XDG_CACHE_HOME/llamaweb/rows, else\n"
               "                     ~/.cache/llamaweb/rows)\n");
}

int lw__cli_rows_option(const char *a, const char *v, lw__cli_rows *rows) {
    if (!strcmp(a, "--rows-dir")) {
        if (!v || !*v) return -1;
        rows->dir = v;
        return 2;
    }
    uint32_t *dst = !strcmp(a, "--rows-embd")        ? &rows->embd
                    : !strcmp(a, "--rows-per-layer") ? &rows->per_layer
                    : !strcmp(a, "--rows-experts")   ? &rows->experts
                                                     : NULL;
    if (!dst) return 0;
    char *end;
    if (!v || !*v || *v == '-') return -1;
    unsigned long n = strtoul(v, &end, 10);
    if (*end || n > UINT32_MAX) return -1;
    *dst = (uint32_t)n;
    return 2;
}

/* Parses a number; 0 when v is not entirely one. */
static int num(const char *v, double lo, double hi, double *out) {
    char *end;
    double d = strtod(v, &end);
    if (!*v || *end || !(d >= lo && d <= hi)) return 0;
    *out = d;
    return 1;
}

uint32_t lw__cli_kv_type(const char *v) {
    static const struct {
        const char *name; /* as llama.cpp's --cache-type-k / -v */
        uint32_t type;    /* LW_TYPE_*                          */
    } kinds[] = {{"f16", LW_TYPE_F16}, {"f32", LW_TYPE_F32}, {"q8_0", LW_TYPE_Q8_0}, {"q4_0", LW_TYPE_Q4_0}};
    for (size_t i = 0; v && i < sizeof kinds / sizeof kinds[0]; i++)
        if (!strcmp(v, kinds[i].name)) return kinds[i].type;
    return UINT32_MAX;
}

int lw__cli_gen_option(const char *a, const char *v, lw__cli_gen *o) {
    lw_sampler_params *sp = &o->sampler;
    double d;
    const int rows = lw__cli_rows_option(a, v, &o->rows);
    if (rows) return rows;
    if (!strcmp(a, "--grammar") || !strcmp(a, "--json-schema")) {
        if (!v) return -1;
        if (a[2] == 'g') o->grammar_file = v;
        else o->schema_file = v;
        return 2;
    }
    if (!strcmp(a, "--tools") || !strcmp(a, "--tool-choice")) {
        if (!v) return -1;
        if (a[6] == 's') o->tools_file = v;
        else o->tool_choice = v;
        return 2;
    }
    if (!strcmp(a, "--tool-format")) {
        static const char *const names[] = {"auto", "hermes", "llama3", "mistral"};
        for (int i = 0; v && i < 4; i++)
            if (!strcmp(v, names[i])) {
                o->tool_format = i; /* the lw_tool_format values, in order */
                return 2;
            }
        return -1;
    }
    if (!strcmp(a, "--no-parallel-tool-calls")) {
        o->parallel_tools = 0;
        return 1;
    }
    if (!strcmp(a, "--json")) {
        o->json = 1;
        return 1;
    }
    if (!strcmp(a, "--no-flash-attn")) {
        o->flash_attn = 0;
        return 1;
    }
    if (!strcmp(a, "--kv")) {
        o->kv = lw__cli_kv_type(v);
        return o->kv == UINT32_MAX ? -1 : 2;
    }
    if (!strcmp(a, "--seed")) {
        char *end;
        if (!v || !*v) return -1;
        sp->seed = strtoull(v, &end, 0);
        return *end ? -1 : 2;
    }
    /* numeric options: name, bounds, destination */
    static const struct {
        const char *name, *alias; /* option names                      */
        double lo, hi;            /* accepted range                    */
        int is_int;               /* 1: an integer option              */
    } opts[] = {
        {"--temp", NULL, 0, 1e6, 0},        {"--top-k", NULL, -1, 1e9, 1},
        {"--top-p", NULL, 0, 1, 0},         {"--min-p", NULL, 0, 1, 0},
        {"--repeat-penalty", NULL, 0, 1e6, 0}, {"--repeat-last-n", NULL, 0, 1e9, 1},
        {"--threads", "-t", 0, 1024, 1},
    };
    for (size_t i = 0; i < sizeof opts / sizeof opts[0]; i++) {
        if (strcmp(a, opts[i].name) && (!opts[i].alias || strcmp(a, opts[i].alias))) continue;
        if (!v || !num(v, opts[i].lo, opts[i].hi, &d) || (opts[i].is_int && d != (double)(long)d)) return -1;
        switch (i) {
        case 0: sp->temp = (float)d; break;
        case 1: sp->top_k = (int32_t)d; break;
        case 2: sp->top_p = (float)d; break;
        case 3: sp->min_p = (float)d; break;
        case 4: sp->penalty_repeat = (float)d; break;
        case 5: sp->penalty_last_n = (int32_t)d; break;
        default: o->n_threads = (int32_t)d; break;
        }
        return 2;
    }
    return 0;
}

double lw__cli_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

int lw__cli_load_model(const char *cmd, const char *path, lw_model **m) {
    return lw__cli_load_model_rows(cmd, path, NULL, 0, m);
}

int lw__cli_load_model_rows(const char *cmd, const char *path, const lw__cli_rows *rows, int no_vocab,
                            lw_model **m) {
    lw_model_params mp = lw_model_default_params();
    if (rows) {
        mp.rows_embd = rows->embd;
        mp.rows_per_layer = rows->per_layer;
        mp.rows_experts = rows->experts;
        mp.rows_dir = rows->dir;
    }
    mp.no_vocab = no_vocab;
    if (lw_model_load_file(path, &mp, m) != LW_OK) {
        fprintf(stderr, "llamaweb %s: %s\n", cmd, lw_model_error(*m));
        lw_model_free(*m);
        *m = NULL;
        return 1;
    }
    const char *msg;
    lw_status st = lw_model_rows_status(*m, &msg);
    if (rows && (rows->embd || rows->per_layer || rows->experts))
        fprintf(stderr, "llamaweb %s: %s%s%s\n", cmd, st == LW_OK ? "" : lw_status_str(st), st == LW_OK ? "" : ": ",
                msg);
    return 0;
}

void lw__cli_rows_report(const char *cmd, const lw_context *c) {
    static const char *const names[LW_ROWS_N_TABLES] = {"token_embd", "per_layer_token_embd", "experts"};
    for (int t = 0; t < LW_ROWS_N_TABLES; t++) {
        lw_rows_stats rs;
        if (lw_context_rows_table_stats(c, (lw_rows_table)t, &rs) != LW_OK || !rs.active) continue;
        fprintf(stderr,
                "llamaweb %s: row cache %s: %u of %u rows (%.1f MiB of %.1f), %llu lookups, %llu hits, %llu "
                "misses "
                "(%.2f %% hits), %llu warm loads, %.2f MiB read\n",
                cmd, names[t], rs.n_slots, rs.n_rows, (double)rs.n_slots * (double)rs.row_bytes / 1048576.0,
                (double)rs.n_rows * (double)rs.row_bytes / 1048576.0, (unsigned long long)rs.lookups,
                (unsigned long long)rs.hits, (unsigned long long)rs.misses,
                rs.lookups ? 100.0 * (double)rs.hits / (double)rs.lookups : 0.0,
                (unsigned long long)rs.warm_loads, (double)rs.bytes_read / 1048576.0);
    }
}

/* The tool-call format: the option's, else the one the model's chat template shows (Hermes when none). */
static lw_tool_format tool_format(const lw__cli_gen *o, lw_model *m) {
    if (o->tool_format != LW_TOOL_FORMAT_AUTO) return (lw_tool_format)o->tool_format;
    const char *tmpl = NULL, *bos, *eos;
    if (lw_chat_from_gguf(lw_model_gguf(m), &tmpl, &bos, &eos) != LW_OK) tmpl = NULL;
    lw_tool_format f = lw_tool_format_detect(tmpl);
    return f == LW_TOOL_FORMAT_AUTO ? LW_TOOL_FORMAT_HERMES : f;
}

/* --tools with --tool-choice required / NAME: the grammar of calls of those tools. */
static int make_tool_grammar(const char *cmd, lw_model *m, lw__cli_gen *o, lw_sampler *s) {
    size_t len = 0;
    char *text = lw__cli_read_file(o->tools_file, &len);
    if (!text) {
        fprintf(stderr, "llamaweb %s: cannot read %s\n", cmd, o->tools_file);
        return 1;
    }
    const char *only = strcmp(o->tool_choice, "required") ? o->tool_choice : NULL;
    o->tool_format = tool_format(o, m);
    lw_status st = lw_grammar_from_tools(text, len, (lw_tool_format)o->tool_format, only, o->parallel_tools,
                                         lw_model_vocab(m), NULL, &o->grammar);
    free(text);
    if (st == LW_OK) st = lw_sampler_set_grammar(s, o->grammar);
    if (st != LW_OK) {
        fprintf(stderr, "llamaweb %s: %s: %s\n", cmd, o->tools_file,
                o->grammar ? lw_grammar_error(o->grammar) : lw_status_str(st));
        return 1;
    }
    return 0;
}

void lw__cli_gen_tool_calls(const lw__cli_gen *o, const char *text, size_t len) {
    if (!o->tools_file) return;
    lw_tool_calls *tc = NULL;
    /* a format given or found at set-up; otherwise every convention is tried */
    if (lw_tool_calls_parse(text, len, (lw_tool_format)o->tool_format, NULL, &tc) == LW_OK)
        printf("tool_calls: %s\n", lw_tool_calls_json(tc, NULL));
    else
        fprintf(stderr, "llamaweb: tool calls: %s\n", lw_tool_calls_error(tc));
    fflush(stdout);
    lw_tool_calls_free(tc);
}

/* Makes the grammar the options ask for and attaches it to the sampler; prints why and returns 1 on failure. */
static int make_grammar(const char *cmd, lw_model *m, lw__cli_gen *o, lw_sampler *s) {
    const int tool_grammar = o->tools_file && o->tool_choice && strcmp(o->tool_choice, "auto");
    if (!!o->grammar_file + !!o->schema_file + !!o->json + tool_grammar > 1) {
        fprintf(stderr, "llamaweb %s: --grammar, --json-schema, --json and --tool-choice exclude each other\n", cmd);
        return 1;
    }
    if (o->tool_choice && !o->tools_file) {
        fprintf(stderr, "llamaweb %s: --tool-choice needs --tools\n", cmd);
        return 1;
    }
    if (tool_grammar && !lw_model_vocab(m)) {
        fprintf(stderr, "llamaweb %s: a grammar needs the model's tokenizer\n", cmd);
        return 1;
    }
    if (tool_grammar) return make_tool_grammar(cmd, m, o, s);
    if (o->tools_file && o->tool_format == LW_TOOL_FORMAT_AUTO) { /* parsing: the template's, else every one */
        const char *tmpl = NULL, *bos, *eos;
        if (lw_chat_from_gguf(lw_model_gguf(m), &tmpl, &bos, &eos) == LW_OK) o->tool_format = lw_tool_format_detect(tmpl);
    }
    const char *path = o->grammar_file ? o->grammar_file : o->schema_file;
    if (!path && !o->json) return 0;
    const lw_vocab *v = lw_model_vocab(m);
    if (!v) {
        fprintf(stderr, "llamaweb %s: a grammar needs the model's tokenizer\n", cmd);
        return 1;
    }
    size_t len = 0;
    char *text = NULL;
    if (path && !(text = lw__cli_read_file(path, &len))) {
        fprintf(stderr, "llamaweb %s: cannot read %s\n", cmd, path);
        return 1;
    }
    lw_status st = o->grammar_file ? lw_grammar_parse(text, len, NULL, v, NULL, &o->grammar)
                                   : lw_grammar_from_json_schema(text, len, v, NULL, &o->grammar);
    free(text);
    if (st == LW_OK) st = lw_sampler_set_grammar(s, o->grammar);
    if (st != LW_OK) {
        fprintf(stderr, "llamaweb %s: %s%s%s\n", cmd, path ? path : "--json", path ? ": " : ": ",
                o->grammar ? lw_grammar_error(o->grammar) : lw_status_str(st));
        return 1;
    }
    return 0;
}

void lw__cli_gen_free_grammar(lw__cli_gen *o) {
    lw_grammar_free(o->grammar);
    o->grammar = NULL;
}

int lw__cli_gen_context(const char *cmd, lw_model *m, lw__cli_gen *o, uint32_t n_ctx, lw_context **c,
                        lw_sampler **s) {
    *c = NULL, *s = NULL;
    lw_context_params cp = lw_context_default_params();
    cp.n_ctx = n_ctx;
    cp.n_threads = o->n_threads;
    cp.type_k = cp.type_v = o->kv;
    cp.flash_attn = o->flash_attn;
    if (lw_context_create(m, &cp, c) != LW_OK) {
        fprintf(stderr, "llamaweb %s: %s\n", cmd, lw_context_error(*c));
        return 1;
    }
    if (lw_sampler_create(lw_model_n_vocab(m), &o->sampler, NULL, s) != LW_OK) {
        fprintf(stderr, "llamaweb %s: out of memory for the sampler\n", cmd);
        return 1;
    }
    return make_grammar(cmd, m, o, *s);
}

void lw__cli_gen_close(lw_model *m, lw_context *c, lw_sampler *s) {
    lw_sampler_free(s);
    lw_context_free(c);
    lw_model_free(m);
}
