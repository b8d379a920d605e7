/* The kinds of grammar llama.cpp ships as GBNF examples (JSON, a list, arithmetic, chess moves), written here
 * in its dialect: each parses; sample texts are accepted whole, as a prefix only, or refused; and each
 * constrains generation: random walks over a real vocabulary (../shared/vocab/ggml-vocab-llama-spm.gguf, a
 * "model" drawing uniformly among the allowed tokens and ending when the grammar lets it, half the time)
 * and sampled generations through stories260K (../shared/models) give texts that a checker written here
 * independently of the grammar engine accepts (a recursive-descent parser for arithmetic, POSIX regular
 * expressions for the list and the moves, the library's separate JSON reader for JSON), and that a fresh
 * grammar without a vocabulary accepts whole. The shared parts are skipped visibly when absent.
 * LW_GRAMMAR_WALKS=N: walks per grammar (default 40, 12 under the sanitizers; a quarter as many generations).
 */
#include "core/core.h"
#include "grammar/grammar.h"
#include "structured-test.h"
#include "synth/synth.h"
#include "test.h"

#include <regex.h>
#include <stdint.h>
#include <sys/stat.h>

/* ---------------------------------------------------------------------------------------------------------
 * The grammars and their independent checkers
 * ------------------------------------------------------------------------------------------------------- */

/* JSON: an object at the top, any values inside, bounded whitespace (as llama.cpp's json.gbnf bounds it). */
static const char g_json[] =
    "root ::= obj\n"
    "val ::= obj | arr | str | num | lit\n"
    "obj ::= \"{\" sp (member (\",\" sp member)*)? \"}\" sp\n"
    "member ::= str \":\" sp val\n"
    "arr ::= \"[\" sp (val (\",\" sp val)*)? \"]\" sp\n"
    "str ::= \"\\\"\" (plain | \"\\\\\" esc)* \"\\\"\" sp\n"
    "plain ::= [^\"\\\\\\x00-\\x1F\\x7F]\n"
    "esc ::= [\"\\\\/bfnrt] | \"u\" hex hex hex hex\n"
    "hex ::= [0-9a-fA-F]\n"
    "num ::= \"-\"? (\"0\" | [1-9] [0-9]{0,12}) (\".\" [0-9]{1,8})? ([eE] [+-]? [0-9]{1,3})? sp\n"
    "lit ::= (\"true\" | \"false\" | \"null\") sp\n"
    "sp ::= ([ \\t\\n] sp0)?\n"
    "sp0 ::= [ \\t]{0,8}\n";

/* A short list: one to five "- " items of a few words (bounded: a generation must come to its end). */
static const char g_list[] = "root ::= item{1,5}\n"
                             "item ::= \"- \" word (\" \" word){0,5} \"\\n\"\n"
                             "word ::= [a-zA-Z0-9']{1,10}\n";
static const char re_list[] = "^(- [a-zA-Z0-9']{1,10}( [a-zA-Z0-9']{1,10}){0,5}\n){1,5}$";

/* Arithmetic: equations of sums of products of factors (numbers, negated or not, and parenthesised sums),
 * one to three lines. */
static const char g_arith[] = "root ::= (eq \"\\n\"){1,3}\n"
                              "eq ::= sum \" = \" num\n"
                              "sum ::= prod (ws [-+] ws prod){0,3}\n"
                              "prod ::= factor (ws [*/] ws factor){0,3}\n"
                              "factor ::= \"-\"? (num | \"(\" ws sum ws \")\")\n"
                              "num ::= [0-9]{1,4}\n"
                              "ws ::= \" \"?\n";

/* Chess: numbered turns of two moves in standard algebraic notation (castling, piece moves with a file or
 * rank to tell pieces apart, pawn moves and captures, promotion, check or mate). */
static const char g_chess[] = "root ::= \"1. \" turn (\" \" n \". \" turn){0,4}\n"
                              "turn ::= move \" \" move\n"
                              "move ::= (castle | piece | pawn) [+#]?\n"
                              "castle ::= \"O-O\" \"-O\"?\n"
                              "piece ::= [KQRBN] [a-h1-8]? \"x\"? sq\n"
                              "pawn ::= ([a-h] \"x\")? sq (\"=\" [QRBN])?\n"
                              "sq ::= [a-h] [1-8]\n"
                              "n ::= [1-9] [0-9]?\n";
#define SAN "(O-O(-O)?|[KQRBN][a-h1-8]?x?[a-h][1-8]|([a-h]x)?[a-h][1-8](=[QRBN])?)[+#]?"
static const char re_chess[] = "^1\\. " SAN " " SAN "( [1-9][0-9]?\\. " SAN " " SAN "){0,4}$";

/* Arithmetic by recursive descent over the text (no grammar engine): 1 when s is in the language. */
static const char *ar_sum(const char *p, int depth);
static const char *ar_ws(const char *p) {
    return *p == ' ' ? p + 1 : p;
}
static const char *ar_num(const char *p) {
    int n = 0;
    while (n < 4 && p[n] >= '0' && p[n] <= '9') n++;
    return n ? p + n : NULL;
}
static const char *ar_factor(const char *p, int depth) {
    if (depth > 200) return NULL;
    if (*p == '-') p++;
    if (*p == '(') {
        const char *q = ar_sum(ar_ws(p + 1), depth + 1);
        if (!q) return NULL;
        q = ar_ws(q);
        return *q == ')' ? q + 1 : NULL;
    }
    return ar_num(p);
}
/* The longest match of `item (ws op ws item){0,3}` from p: after an operator an item must follow, but a
 * space without an operator after it belongs to what comes next (" = ", or the ws before ")"). */
static const char *ar_list(const char *p, int depth, const char *ops,
                           const char *(*item)(const char *, int)) {
    p = item(p, depth);
    for (int k = 0; p && k < 3; k++) {
        const char *q = ar_ws(p);
        if (!*q || !strchr(ops, *q)) return p;
        const char *r = item(ar_ws(q + 1), depth);
        if (!r) return p; /* e.g. "1 -" followed by no factor: not ours to take */
        p = r;
    }
    return p;
}
static const char *ar_prod(const char *p, int depth) {
    return ar_list(p, depth, "*/", ar_factor);
}
static const char *ar_sum(const char *p, int depth) {
    return ar_list(p, depth, "+-", ar_prod);
}
static int arith_ok(const char *s) {
    int lines = 0;
    while (*s) {
        const char *p = ar_sum(s, 0);
        if (!p || strncmp(p, " = ", 3)) return 0;
        p = ar_num(p + 3);
        if (!p || *p != '\n') return 0;
        s = p + 1;
        lines++;
    }
    return lines >= 1 && lines <= 3;
}

static int regex_ok(const char *re, const char *s) {
    regex_t r;
    if (regcomp(&r, re, REG_EXTENDED | REG_NOSUB) != 0) return 0;
    int ok = regexec(&r, s, 0, NULL, 0) == 0;
    regfree(&r);
    return ok;
}

static lw_allocator libc;

/* JSON through the library's JSON reader (src/grammar/json-schema.c, not the GBNF matcher): one object. */
static int json_ok(const char *s) {
    lw__json j;
    char err[LW_ERRMSG_SIZE];
    if (lw__json_parse(s, strlen(s), 0, &libc, &j, err) != LW_OK) return 0;
    int ok = j.n[j.root].type == LW_JSON_OBJ;
    lw__json_free(&libc, &j);
    return ok;
}

typedef struct example {
    const char *name, *gbnf;
    int (*check)(const char *text); /* the independent checker */
    const char *closers;            /* single characters a walk prefers past half its budget */
    int max_tokens;                 /* a walk's budget */
} example;

static int list_ok(const char *s) {
    return regex_ok(re_list, s);
}
static int chess_ok(const char *s) {
    return regex_ok(re_chess, s);
}

static const example examples[] = {
    {"json", g_json, json_ok, "\"]}0123456789el", 300},
    {"list", g_list, list_ok, " \n", 120},
    {"arithmetic", g_arith, arith_ok, ")0123456789\n= ", 100},
    {"chess", g_chess, chess_ok, "12345678 ", 80},
};

/* ---------------------------------------------------------------------------------------------------------
 * Texts: accepted whole, as a prefix, refused (the checkers agree where they apply)
 * ------------------------------------------------------------------------------------------------------- */

/* 2: whole; 1: prefix only; 0: refused; -1: the grammar fails to parse. */
static int match(const char *gbnf, const char *text) {
    lw_grammar *g = NULL;
    if (lw_grammar_parse(gbnf, strlen(gbnf), NULL, NULL, NULL, &g) != LW_OK) {
        printf("grammar failed: %s\n", lw_grammar_error(g));
        lw_grammar_free(g);
        return -1;
    }
    int r = 0;
    if (lw_grammar_accept_text(g, text, strlen(text)) == LW_OK) r = lw_grammar_is_complete(g) ? 2 : 1;
    lw_grammar_free(g);
    return r;
}

static void test_texts(void) {
    static const struct {
        int ex, want; /* examples[ex]; 2 whole, 1 prefix, 0 refused */
        const char *text;
    } cases[] = {
        {0, 2, "{}"},
        {0, 2, "{\"a\": [1, -2.5e+3, true, null, {\"b\": \"x\\u00e9\\n\"}], \"c\": false}"},
        {0, 2, "{\n  \"k\": \"caf\xc3\xa9\"}\n"},
        {0, 1, "{\"a\": [1, "},
        {0, 0, "[1, 2]"},                 /* the top is an object */
        {0, 0, "{\"a\": 01}"},            /* no leading zeros */
        {0, 0, "{\"a\": \"tab\there\"}"}, /* a control character in a string */
        {0, 0, "{'a': 1}"},
        {0, 0, "{\"a\": 1,}"},
        {1, 2, "- milk\n- two eggs\n"},
        {1, 2, "- a b c d e f\n"},
        {1, 0, "- a b c d e f g\n"}, /* seven words */
        {1, 1, "- bread"},
        {1, 0, "* bread\n"},
        {1, 0, "- x\n- x\n- x\n- x\n- x\n- x\n"}, /* six items */
        {2, 2, "1 + 2 * 3 = 7\n"},
        {2, 2, "(1+2)*-3 = 9\n-(4) / 2 = 2\n"},
        {2, 2, "1+2+3+4 = 10\n"},
        {2, 0, "1+2+3+4+5 = 15\n"}, /* four operators in one sum */
        {2, 0, "--1 = 1\n"},
        {2, 2, "( 12 - 3 ) * 4 = 36\n"},
        {2, 1, "((1 + 2"},
        {2, 0, "1 + = 3\n"},
        {2, 0, "12345 = 1\n"},
        {2, 0, "1 + 2\n"},
        {2, 0, "1 ++ 2 = 3\n"},
        {3, 2, "1. e4 e5 2. Nf3 Nc6 3. Bb5 a6"},
        {3, 2, "1. d4 Nf6 2. c4 e6 3. Nc3 Bb4 4. Qc2 O-O 5. a3 Bxc3+"},
        {3, 2, "1. exd5 Qxd5 2. e8=Q+ Kxe8 3. Nbd7 R1a3#"},
        {3, 1, "1. e4 e5 2. Nf"},
        {3, 0, "1. e9 e5"},
        {3, 0, "1. Pe4 e5"},
        {3, 0, "1. e4 e5 2. O-O-O-O O-O"},
        {3, 0, "e4 e5"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const example *e = &examples[cases[i].ex];
        int got = match(e->gbnf, cases[i].text);
        CHECK_MSG(got == cases[i].want, "%s: '%s': %d, want %d", e->name, cases[i].text, got, cases[i].want);
        /* the independent checker agrees on whole texts and refusals (a prefix is neither) */
        if (cases[i].want != 1)
            CHECK_MSG(e->check(cases[i].text) == (cases[i].want == 2), "%s checker: '%s'", e->name,
                      cases[i].text);
    }
    for (size_t k = 0; k < sizeof examples / sizeof examples[0]; k++) {
        lw_grammar *g = NULL;
        CHECK_MSG(lw_grammar_parse(examples[k].gbnf, strlen(examples[k].gbnf), NULL, NULL, NULL, &g) == LW_OK,
                  "%s: %s", examples[k].name, lw_grammar_error(g));
        lw_grammar_free(g);
    }
}

/* ---------------------------------------------------------------------------------------------------------
 * Random walks over a real vocabulary
 * ------------------------------------------------------------------------------------------------------- */

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;
static uint32_t rnd(void) {
    rng_state ^= rng_state << 13, rng_state ^= rng_state >> 7, rng_state ^= rng_state << 17;
    return (uint32_t)(rng_state >> 16);
}

/* One walk under g (reset first): the text (malloc'd); *done 1 when it ended with an end-of-generation token.
 */
static char *walk(lw_grammar *g, const lw_vocab *v, const example *e, uint32_t *bits, int32_t *allowed,
                  int *done) {
    const int32_t n = lw_grammar_n_vocab(g);
    size_t cap = 1024, len = 0;
    char *out = malloc(cap);
    if (!out) return NULL;
    out[0] = 0;
    *done = 0;
    lw_grammar_reset(g);
    for (int step = 0; step < e->max_tokens; step++) {
        lw_status st = lw_grammar_mask(g, bits, (size_t)(n + 31) / 32);
        CHECK_MSG(st == LW_OK, "%s: %s", e->name, lw_grammar_error(g));
        if (st != LW_OK) break;
        int na = 0, eog = -1;
        for (int32_t t = 0; t < n; t++)
            if (bits[t >> 5] >> (t & 31) & 1) {
                if (lw_vocab_is_eog(v, t))
                    eog = t;
                else
                    allowed[na++] = t;
            }
        /* the end exactly when the grammar is complete */
        CHECK_MSG((eog >= 0) == !!lw_grammar_is_complete(g), "%s: the end allowed %d, complete %d after '%s'",
                  e->name, eog >= 0, lw_grammar_is_complete(g), out);
        if (eog >= 0 && (na == 0 || rnd() % 2 == 0 || step > e->max_tokens * 3 / 4)) {
            CHECK(lw_grammar_accept_token(g, eog) == LW_OK);
            *done = 1;
            break;
        }
        CHECK_MSG(na > 0, "%s: no token allowed after '%s'", e->name, out);
        if (na == 0) break;
        int32_t t = allowed[rnd() % (uint32_t)na];
        if (step > e->max_tokens / 2) /* a "model" that wants to finish: short tokens that close things */
            for (int k = 0; k < 64; k++) {
                int32_t c = allowed[rnd() % (uint32_t)na];
                char piece[64];
                size_t pl = 0;
                if (lw_token_to_piece(v, c, 0, 0, piece, sizeof piece, &pl) == LW_OK && pl == 1 &&
                    strchr(e->closers, piece[0])) {
                    t = c;
                    break;
                }
            }
        CHECK(lw_grammar_accept_token(g, t) == LW_OK);
        char piece[512];
        size_t pl = 0;
        if (lw_token_to_piece(v, t, 0, 0, piece, sizeof piece, &pl) != LW_OK) pl = 0;
        if (len + pl + 1 > cap) {
            char *o = realloc(out, cap = 2 * (len + pl + 1));
            if (!o) break;
            out = o;
        }
        memcpy(out + len, piece, pl);
        out[len += pl] = 0;
    }
    return out;
}

/* Walks under each example: every finished text passes the independent checker and a fresh grammar. */
static int test_walks(int n_walks) {
    char path[1024], err[256];
    snprintf(path, sizeof path, "%s/vocab/ggml-vocab-llama-spm.gguf", test_shared_dir());
    lw_source *src = NULL;
    lw_gguf *gg = NULL;
    lw_vocab *v = NULL;
    if (lw_source_open_file(path, NULL, &src, err, sizeof err) != LW_OK) {
        printf("SKIP (walks): no %s\n", path);
        return 0;
    }
    CHECK(lw_gguf_open(src, NULL, &gg) == LW_OK && lw_vocab_load(gg, NULL, &v) == LW_OK);
    int total = 0;
    if (v) {
        const int32_t n = (int32_t)lw_vocab_n_tokens(v);
        uint32_t *bits = calloc((size_t)(n + 31) / 32, 4);
        int32_t *allowed = malloc(sizeof(int32_t) * (size_t)n);
        for (size_t k = 0; bits && allowed && k < sizeof examples / sizeof examples[0]; k++) {
            const example *e = &examples[k];
            lw_grammar *g = NULL, *fresh = NULL;
            CHECK_MSG(lw_grammar_parse(e->gbnf, strlen(e->gbnf), NULL, v, NULL, &g) == LW_OK, "%s: %s",
                      e->name, lw_grammar_error(g));
            CHECK(lw_grammar_parse(e->gbnf, strlen(e->gbnf), NULL, NULL, NULL, &fresh) == LW_OK);
            int finished = 0;
            for (int i = 0; g && fresh && i < n_walks; i++) {
                int done = 0;
                char *t = walk(g, v, e, bits, allowed, &done);
                if (!t) break;
                lw_grammar_reset(fresh);
                const int prefix = lw_grammar_accept_text(fresh, t, strlen(t)) == LW_OK;
                CHECK_MSG(prefix, "%s walk %d: the text is not even a prefix: '%s'", e->name, i, t);
                if (done) {
                    finished++;
                    CHECK_MSG(prefix && lw_grammar_is_complete(fresh), "%s walk %d: not whole: '%s'", e->name,
                              i, t);
                    CHECK_MSG(e->check(t), "%s walk %d: the independent checker refuses '%s'", e->name, i, t);
                }
                if (i == 0) printf("%s walk: %s%s", e->name, t, t[0] && t[strlen(t) - 1] == '\n' ? "" : "\n");
                free(t);
            }
            printf("%s: %d walks over %d tokens, %d finished (all checked)\n", e->name, n_walks, n, finished);
            CHECK_MSG(finished >= n_walks / 2, "%s: only %d of %d walks finished", e->name, finished,
                      n_walks);
            total += finished;
            lw_grammar_free(g);
            lw_grammar_free(fresh);
        }
        free(bits);
        free(allowed);
    }
    lw_vocab_free(v);
    lw_gguf_close(gg);
    lw_source_close(src);
    return total;
}

/* ---------------------------------------------------------------------------------------------------------
 * Generations through a model (the sampler's grammar path)
 * ------------------------------------------------------------------------------------------------------- */

static int test_model(int n_runs) {
    char path[1024];
    snprintf(path, sizeof path, "%s/models/stories260K.gguf", test_shared_dir());
    FILE *f = fopen(path, "rb");
    if (!f) {
        printf("SKIP (generations): no %s\n", path);
        return 0;
    }
    fclose(f);
    lw_model *m = NULL;
    CHECK_MSG(lw_model_load_file(path, NULL, &m) == LW_OK, "%s", m ? lw_model_error(m) : path);
    int total = 0;
    for (size_t k = 0; m && k < sizeof examples / sizeof examples[0]; k++) {
        const example *e = &examples[k];
        lw_context *c = NULL;
        lw_sampler *s = NULL;
        lw_grammar *g = NULL, *fresh = NULL;
        CHECK(gen_setup(m, 512, 1.0f, &c, &s) == 0);
        CHECK(lw_grammar_parse(e->gbnf, strlen(e->gbnf), NULL, lw_model_vocab(m), NULL, &g) == LW_OK);
        CHECK(lw_grammar_parse(e->gbnf, strlen(e->gbnf), NULL, NULL, NULL, &fresh) == LW_OK);
        if (c && s && g && fresh && lw_sampler_set_grammar(s, g) == LW_OK) {
            int finished = 0;
            for (int i = 0; i < n_runs; i++) {
                lw_context_set_n_past(c, 0);
                lw_sampler_reset(s, 77 + (uint64_t)i);
                text_buf b = {{0}, 0};
                lw_generate_params gp = lw_generate_default_params();
                gp.n_predict = 2 * e->max_tokens;
                gp.on_token = text_buf_on_token;
                gp.user = &b;
                lw_generate_result r;
                lw_status st = lw_generate_text(c, s, "Once upon a time", 16, 1, 0, &gp, &r);
                CHECK_MSG(st == LW_OK, "%s run %d: %s / %s", e->name, i, lw_context_error(c),
                          lw_grammar_error(g));
                lw_grammar_reset(fresh);
                const int prefix = lw_grammar_accept_text(fresh, b.s, b.n) == LW_OK;
                CHECK_MSG(prefix, "%s run %d: not a prefix: '%s'", e->name, i, b.s);
                if (st != LW_OK || r.stop != LW_STOP_EOG) continue; /* cut by n_predict: a prefix */
                finished++;
                CHECK_MSG(prefix && lw_grammar_is_complete(fresh) && e->check(b.s), "%s run %d: '%s'",
                          e->name, i, b.s);
            }
            printf("%s: %d generations through stories260K, %d finished (all checked)\n", e->name, n_runs,
                   finished);
            /* JSON has no bound (the model rarely closes it in time); the others end within their budget */
            if (e->gbnf != g_json)
                CHECK_MSG(finished >= n_runs / 2, "%s: %d of %d generations finished", e->name, finished,
                          n_runs);
            total += finished;
        }
        lw_sampler_free(s);
        lw_context_free(c);
        lw_grammar_free(g);
        lw_grammar_free(fresh);
    }
    lw_model_free(m);
    return total;
}

/* ---------------------------------------------------------------------------------------------------------
 * 1,000 generations through a synthetic model
 * ------------------------------------------------------------------------------------------------------- */

/* A schema whose replies are bounded (strings, arrays and integers have limits), validated by jsonschema. */
static const char schema_pet[] =
    "{\"type\":\"object\",\"properties\":{\"name\":{\"type\":\"string\",\"maxLength\":6},\"kind\":{\"enum\":"
    "[\"cat\",\"dog\"]},\"age\":{\"type\":\"integer\",\"minimum\":0,\"maximum\":30},\"tags\":{\"type\":"
    "\"array\",\"items\":{\"type\":\"boolean\"},\"maxItems\":2}},\"required\":[\"name\",\"kind\"]}";

/* Generations through a tiny synthetic llama (byte vocabulary, random weights, temperature 1) under the
 * example grammars and a JSON Schema in turn, until `want` have ended by the model: each finished text passes
 * its checker (jsonschema for the schema's, one python run at the end) and a fresh grammar, each cut one is a
 * prefix. Returns how many finished. */
static int test_synth(int want) {
    char path[1024], log_path[1024], err[LW_ERRMSG_SIZE] = "";
    mkdir(test_tmp_dir(), 0777);
    snprintf(path, sizeof path, "%s/grammar-examples-synth.gguf", test_tmp_dir());
    snprintf(log_path, sizeof log_path, "%s/grammar-examples-synth.jsonl", test_tmp_dir());
    lw__synth_params sp = {0};
    sp.preset = "tiny";
    sp.type = "f32";
    sp.vocab_path = "builtin";
    sp.seed = 11;
    CHECK_MSG(lw__synth_write(&sp, path, NULL, NULL, err) == LW_OK, "writing %s: %s", path, err);
    lw_model *m = NULL;
    CHECK_MSG(lw_model_load_file(path, NULL, &m) == LW_OK, "%s", m ? lw_model_error(m) : path);
    FILE *log = fopen(log_path, "w");
    const size_t n_kinds = sizeof examples / sizeof examples[0] + 1; /* the examples, then the schema */
    lw_context *c = NULL;
    lw_sampler *s = NULL;
    lw_grammar *g[8] = {0}, *fresh[8] = {0};
    int finished = 0, attempts = 0, per[8] = {0}, n_schema = 0;
    if (!m || !log || gen_setup(m, 512, 1.0f, &c, &s) != 0) goto done;
    for (size_t k = 0; k < n_kinds; k++) {
        const lw_vocab *v = lw_model_vocab(m);
        lw_status a = k < n_kinds - 1
                          ? lw_grammar_parse(examples[k].gbnf, strlen(examples[k].gbnf), NULL, v, NULL, &g[k])
                          : lw_grammar_from_json_schema(schema_pet, strlen(schema_pet), v, NULL, &g[k]);
        lw_status b =
            k < n_kinds - 1
                ? lw_grammar_parse(examples[k].gbnf, strlen(examples[k].gbnf), NULL, NULL, NULL, &fresh[k])
                : lw_grammar_from_json_schema(schema_pet, strlen(schema_pet), NULL, NULL, &fresh[k]);
        CHECK_MSG(a == LW_OK && b == LW_OK, "kind %zu: %s", k, lw_grammar_error(g[k]));
        if (a != LW_OK || b != LW_OK) goto done;
    }
    fprintf(log, "{\"vocab\": \"synth\", \"schema\": %s, \"outputs\": [", schema_pet);
    /* JSON (examples[0]) has no bound and a random model seldom closes it: it takes part, but the others
     * carry the count */
    while (finished < want && attempts < 3 * want) {
        const size_t k = (size_t)attempts % n_kinds;
        const int max_tokens = k < n_kinds - 1 ? 2 * examples[k].max_tokens : 200;
        attempts++;
        lw_context_set_n_past(c, 0);
        lw_sampler_set_grammar(s, g[k]);
        lw_grammar_reset(g[k]);
        lw_sampler_reset(s, 5000 + (uint64_t)attempts);
        text_buf b = {{0}, 0};
        lw_generate_params gp = lw_generate_default_params();
        gp.n_predict = max_tokens;
        gp.on_token = text_buf_on_token;
        gp.user = &b;
        lw_generate_result r;
        lw_status st = lw_generate_text(c, s, "x", 1, 1, 0, &gp, &r);
        CHECK_MSG(st == LW_OK, "attempt %d: %s / %s", attempts, lw_context_error(c), lw_grammar_error(g[k]));
        lw_grammar_reset(fresh[k]);
        const int prefix = lw_grammar_accept_text(fresh[k], b.s, b.n) == LW_OK;
        CHECK_MSG(prefix, "attempt %d: not a prefix of kind %zu: '%s'", attempts, k, b.s);
        if (st != LW_OK || r.stop != LW_STOP_EOG) continue;
        CHECK_MSG(prefix && lw_grammar_is_complete(fresh[k]), "attempt %d: not whole: '%s'", attempts, b.s);
        if (k < n_kinds - 1) {
            CHECK_MSG(examples[k].check(b.s), "%s attempt %d: the checker refuses '%s'", examples[k].name,
                      attempts, b.s);
        } else {
            if (n_schema++) fputc(',', log);
            put_json_string(log, b.s);
        }
        per[k]++;
        finished++;
    }
    fprintf(log, "]}\n");
    /* a self-check the validator must refuse: the count below must be exactly 1 */
    fprintf(log,
            "{\"vocab\": \"self-check\", \"schema\": {\"type\": \"integer\", \"maximum\": 30}, \"outputs\": "
            "[\"31\"]}\n");
    fclose(log);
    log = NULL;
    printf("synthetic model: %d constrained generations finished in %d (json %d, list %d, arithmetic %d, "
           "chess %d, "
           "schema %d), all checked\n",
           finished, attempts, per[0], per[1], per[2], per[3], per[4]);
    CHECK_MSG(finished == want, "only %d of %d generations finished in %d attempts", finished, want,
              attempts);
    int bad = jsonschema_validate_log(log_path);
    if (bad < 0)
        printf("note: python3 jsonschema not installed: the schema's replies checked by the grammar only\n");
    else
        printf("jsonschema: %d schema replies validated, %d invalid (1 expected: the self-check)\n", n_schema,
               bad);
    CHECK_MSG(bad < 0 || bad == 1, "%d schema replies fail jsonschema (or the self-check passed)", bad - 1);
done:
    if (log) fclose(log);
    lw_sampler_free(s);
    lw_context_free(c);
    for (size_t k = 0; k < 8; k++) lw_grammar_free(g[k]), lw_grammar_free(fresh[k]);
    lw_model_free(m);
    return finished;
}

int main(void) {
    libc = lw__allocator_or_default(NULL);
    test_texts();
    const char *w = getenv("LW_GRAMMAR_WALKS");
    /* under the sanitizers (scripts/test.sh sets LW_TEST_SANITIZED) fewer: the masks over 32k tokens dominate
     */
    const int n_walks = w && atoi(w) > 0 ? atoi(w) : getenv("LW_TEST_SANITIZED") ? 12 : 40;
    int walked = test_walks(n_walks);
    int generated = test_model(n_walks / 4 > 0 ? n_walks / 4 : 1);
    generated += test_synth(getenv("LW_TEST_SANITIZED") ? 200 : 1000);
    printf("%d walks and %d generations finished under the example grammars, all checked\n", walked,
           generated);
    return test_summary("test-grammar-examples");
}
