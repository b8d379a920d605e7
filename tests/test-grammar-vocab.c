/* Grammars over real vocabularies ($LW_SHARED/vocab): the allowed-token mask against a brute-force check
 * (every token tried on its own), random constrained generations (a random "model": uniform over the allowed
 * tokens) that must parse as JSON / match their schema (validated by Python's jsonschema when installed), and
 * the cost of a mask per step on a 32k and a ~100k vocabulary (printed; LW_GRAMMAR_WALKS=N for more walks). */
#include "structured-test.h"
#include "test.h"

#include "llamaweb.h"

#include <math.h>
#include <stdint.h>
#include <time.h>

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

typedef struct vocab_file {
    lw_source *src;
    lw_gguf *g;
    lw_vocab *v;
} vocab_file;

static int open_vocab(const char *name, vocab_file *vf) {
    char path[1024], err[256];
    snprintf(path, sizeof path, "%s/vocab/%s", test_shared_dir(), name);
    memset(vf, 0, sizeof *vf);
    if (lw_source_open_file(path, NULL, &vf->src, err, sizeof err) != LW_OK) return 0;
    if (lw_gguf_open(vf->src, NULL, &vf->g) != LW_OK || lw_vocab_load(vf->g, NULL, &vf->v) != LW_OK) {
        printf("cannot load %s\n", path);
        return 0;
    }
    return 1;
}

static void close_vocab(vocab_file *vf) {
    lw_vocab_free(vf->v);
    lw_gguf_close(vf->g);
    lw_source_close(vf->src);
}

/* ---------------------------------------------------------------------------------------------------------
 * A small JSON checker (RFC 8259 values), independent of the library's.
 * ------------------------------------------------------------------------------------------------------- */

static const char *jv(const char *p, int depth);
static const char *jws(const char *p) {
    while (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r') p++;
    return p;
}
static const char *jstr(const char *p) {
    if (*p++ != '"') return NULL;
    while (*p != '"') {
        if ((unsigned char)*p < 0x20) return NULL;
        if (*p == '\\') {
            p++;
            if (*p == 'u') {
                for (int i = 1; i <= 4; i++)
                    if (!strchr("0123456789abcdefABCDEF", p[i]) || !p[i]) return NULL;
                p += 5;
                continue;
            }
            if (!*p || !strchr("\"\\/bfnrt", *p)) return NULL;
        }
        p++;
    }
    return p + 1;
}
static const char *jv(const char *p, int depth) {
    if (depth > 200) return NULL;
    p = jws(p);
    if (*p == '{' || *p == '[') {
        char close = *p == '{' ? '}' : ']';
        int obj = *p == '{';
        p = jws(p + 1);
        if (*p == close) return p + 1;
        for (;;) {
            if (obj) {
                if (!(p = jstr(jws(p)))) return NULL;
                p = jws(p);
                if (*p++ != ':') return NULL;
            }
            if (!(p = jv(p, depth + 1))) return NULL;
            p = jws(p);
            if (*p == ',') {
                p++;
                continue;
            }
            if (*p == close) return p + 1;
            return NULL;
        }
    }
    if (*p == '"') return jstr(p);
    if (!strncmp(p, "true", 4)) return p + 4;
    if (!strncmp(p, "false", 5)) return p + 5;
    if (!strncmp(p, "null", 4)) return p + 4;
    const char *s = p;
    if (*p == '-') p++;
    if (*p == '0') p++;
    else if (*p >= '1' && *p <= '9')
        while (*p >= '0' && *p <= '9') p++;
    else return NULL;
    if (*p == '.') {
        p++;
        if (!(*p >= '0' && *p <= '9')) return NULL;
        while (*p >= '0' && *p <= '9') p++;
    }
    if (*p == 'e' || *p == 'E') {
        p++;
        if (*p == '+' || *p == '-') p++;
        if (!(*p >= '0' && *p <= '9')) return NULL;
        while (*p >= '0' && *p <= '9') p++;
    }
    return p > s ? p : NULL;
}
static int is_json(const char *s) {
    const char *e = jv(s, 0);
    return e && *jws(e) == 0;
}

/* ---------------------------------------------------------------------------------------------------------
 * Masks against brute force
 * ------------------------------------------------------------------------------------------------------- */

/* Compares the mask after `prefix` with each token tried alone (reset, the prefix, the token). */
static void check_mask(const lw_vocab *v, const char *gbnf, const char *prefix) {
    lw_grammar *g = NULL, *h = NULL;
    CHECK(lw_grammar_parse(gbnf, strlen(gbnf), NULL, v, NULL, &g) == LW_OK);
    CHECK(lw_grammar_parse(gbnf, strlen(gbnf), NULL, v, NULL, &h) == LW_OK);
    int32_t n = lw_grammar_n_vocab(g);
    uint32_t *bits = calloc((size_t)(n + 31) / 32, 4);
    CHECK(lw_grammar_accept_text(g, prefix, strlen(prefix)) == LW_OK);
    CHECK(lw_grammar_mask(g, bits, (size_t)(n + 31) / 32) == LW_OK);
    int bad = 0, allowed = 0;
    for (int32_t t = 0; t < n; t++) {
        lw_grammar_reset(h);
        lw_grammar_accept_text(h, prefix, strlen(prefix));
        int ok = lw_grammar_accept_token(h, t) == LW_OK;
        int in = (int)(bits[t >> 5] >> (t & 31) & 1);
        allowed += in;
        if (ok != in && bad++ < 5) fprintf(stderr, "token %d: mask %d, accept %d (%s / %s)\n", t, in, ok, gbnf, prefix);
    }
    CHECK_MSG(bad == 0, "%d tokens disagree", bad);
    CHECK(allowed > 0);
    free(bits);
    lw_grammar_free(g);
    lw_grammar_free(h);
}

/* ---------------------------------------------------------------------------------------------------------
 * Random constrained generation
 * ------------------------------------------------------------------------------------------------------- */

static uint64_t rng = 0x1234567;
static uint32_t rnd(void) {
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return (uint32_t)(rng >> 16);
}

/* Generation stats for the timing report. */
typedef struct walk_stats {
    double t_mask;   /* seconds in lw_grammar_mask           */
    double t_max;    /* slowest step                          */
    long steps;      /* masks computed                        */
    int complete;    /* walks that ended at an end token      */
} walk_stats;

/* One walk: returns the text (malloc'd), 1 in *done when it ended with an end-of-generation token. */
static char *walk(lw_grammar *g, const lw_vocab *v, uint32_t *bits, int max_tokens, walk_stats *ws, int *done) {
    int32_t n = lw_grammar_n_vocab(g);
    size_t cap = 4096, len = 0;
    char *out = malloc(cap);
    int32_t *allowed = malloc(sizeof(int32_t) * (size_t)n);
    out[0] = 0;
    *done = 0;
    lw_grammar_reset(g);
    for (int step = 0; step < max_tokens; step++) {
        double t0 = now();
        lw_status st = lw_grammar_mask(g, bits, (size_t)(n + 31) / 32);
        double dt = now() - t0;
        ws->t_mask += dt, ws->steps++;
        if (dt > ws->t_max) ws->t_max = dt;
        CHECK_MSG(st == LW_OK, "%s", lw_grammar_error(g));
        if (st != LW_OK) break;
        int na = 0, eog = -1;
        for (int32_t t = 0; t < n; t++)
            if (bits[t >> 5] >> (t & 31) & 1) {
                if (lw_vocab_is_eog(v, t)) eog = t;
                else allowed[na++] = t;
            }
        /* end when allowed, half the time, or always once past 3/4 of the budget */
        if (eog >= 0 && (na == 0 || rnd() % 2 == 0 || step > max_tokens * 3 / 4)) {
            CHECK(lw_grammar_accept_token(g, eog) == LW_OK);
            *done = 1;
            break;
        }
        CHECK_MSG(na > 0, "no token allowed after '%s'", out);
        if (na == 0) break;
        /* past half the budget prefer short tokens that close things: a crude "model" that wants to finish */
        int32_t t = allowed[rnd() % (uint32_t)na];
        if (step > max_tokens / 2)
            for (int k = 0; k < na; k++) {
                int32_t c = allowed[rnd() % (uint32_t)na];
                size_t pl;
                char piece[64];
                if (lw_token_to_piece(v, c, 0, 0, piece, sizeof piece, &pl) == LW_OK && pl == 1 && strchr("\"]}0123456789el", piece[0])) {
                    t = c;
                    break;
                }
            }
        CHECK(lw_grammar_accept_token(g, t) == LW_OK);
        char piece[512];
        size_t pl = 0;
        if (lw_token_to_piece(v, t, 0, 0, piece, sizeof piece, &pl) != LW_OK) pl = 0;
        if (len + pl + 1 > cap) out = realloc(out, cap = 2 * (len + pl + 1));
        memcpy(out + len, piece, pl);
        out[len += pl] = 0;
    }
    free(allowed);
    ws->complete += *done;
    return out;
}

/* Schemas whose random outputs are validated. */
static const char *schemas[] = {
    "{\"type\":\"object\",\"properties\":{\"name\":{\"type\":\"string\",\"maxLength\":12},\"age\":{\"type\":\"integer\","
    "\"minimum\":0},\"tags\":{\"type\":\"array\",\"items\":{\"enum\":[\"red\",\"green\",\"blue\"]},\"minItems\":1,"
    "\"maxItems\":3},\"ok\":{\"type\":\"boolean\"},\"none\":{\"type\":\"null\"}},\"required\":[\"name\",\"ok\"]}",
    "{\"type\":\"array\",\"items\":{\"type\":\"number\"},\"maxItems\":4}",
    "{\"anyOf\":[{\"type\":\"integer\"},{\"const\":\"fixed \\\"value\\\"\"},{\"type\":\"object\",\"properties\":"
    "{\"k\":{\"type\":[\"string\",\"null\"],\"maxLength\":5}},\"required\":[\"k\"]}]}",
    "{\"$ref\":\"#/$defs/t\",\"$defs\":{\"t\":{\"type\":\"object\",\"properties\":{\"v\":{\"type\":\"integer\"},\"kids\":"
    "{\"type\":\"array\",\"items\":{\"$ref\":\"#/$defs/t\"},\"maxItems\":2}},\"required\":[\"v\"]}}}",
    "{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"string\",\"minLength\":1,\"maxLength\":3},\"b\":{\"enum\":"
    "[1,2.5,\"x\",null,true]}}}",
};

/* Every completed schema output goes to one file (a JSON line per schema and vocabulary), validated at the
 * end by one run of Python's jsonschema (starting Python costs seconds on a loaded CI machine). */
static FILE *walk_log;
static int walk_log_n;

/* Appends text as a JSON string literal. */
static void log_outputs(const char *vname, const char *schema, char **outs, int n) {
    if (!walk_log) return;
    fprintf(walk_log, "{\"vocab\": \"%s\", \"schema\": %s, \"outputs\": [", vname, schema);
    for (int i = 0; i < n; i++) {
        if (i) fputc(',', walk_log);
        put_json_string(walk_log, outs[i]);
    }
    fprintf(walk_log, "]}\n");
    walk_log_n += n;
}

static void test_walks(const lw_vocab *v, const char *vname, int n_walks) {
    int32_t n = (int32_t)lw_vocab_n_tokens(v);
    uint32_t *bits = calloc((size_t)(n + 31) / 32, 4);
    char **outs = calloc((size_t)n_walks, sizeof(char *));
    for (int k = -1; k < (int)(sizeof schemas / sizeof schemas[0]); k++) {
        const char *schema = k < 0 ? NULL : schemas[k];
        lw_grammar *g = NULL;
        double t0 = now();
        lw_status st = lw_grammar_from_json_schema(schema, schema ? strlen(schema) : 0, v, NULL, &g);
        double t_build = now() - t0;
        CHECK_MSG(st == LW_OK, "%s", lw_grammar_error(g));
        if (st != LW_OK) {
            lw_grammar_free(g);
            continue;
        }
        walk_stats ws = {0, 0, 0, 0};
        int n_json = 0;
        for (int i = 0; i < n_walks; i++) {
            int done;
            outs[i] = walk(g, v, bits, 400, &ws, &done);
            if (done) {
                int ok = is_json(outs[i]);
                n_json += ok;
                CHECK_MSG(ok, "%s walk %d: not JSON: %s", vname, i, outs[i]);
            }
        }
        CHECK_MSG(ws.complete >= n_walks * 9 / 10, "%s: only %d of %d walks completed", vname, ws.complete, n_walks);
        if (schema) { /* the completed outputs, for jsonschema at the end */
            int m = 0;
            for (int i = 0; i < n_walks; i++)
                if (is_json(outs[i])) outs[m++] = outs[i];
                else free(outs[i]), outs[i] = NULL;
            log_outputs(vname, schema, outs, m);
            for (int i = 0; i < m; i++) free(outs[i]);
        } else {
            for (int i = 0; i < n_walks; i++) free(outs[i]);
        }
        printf("%s %-8s: build %.1f ms, %d walks, %d complete + JSON, %ld steps, mask %.1f us/step avg, %.2f ms max%s\n",
               vname, k < 0 ? "json" : (char[16]){0}, 1e3 * t_build, n_walks, n_json, ws.steps,
               1e6 * ws.t_mask / (double)(ws.steps ? ws.steps : 1), 1e3 * ws.t_max,
               schema ? " (validated at the end)" : "");
        if (k >= 0) printf("    (schema %d)\n", k);
        lw_grammar_free(g);
    }
    free(outs);
    free(bits);
}

/* The cost of a mask on a cache miss (a full trie walk) and per step in a steady generation, vs the time to
 * sample without a grammar (argmax over n_vocab logits, for scale). */
static void test_speed(const lw_vocab *v, const char *vname) {
    int32_t n = (int32_t)lw_vocab_n_tokens(v);
    uint32_t *bits = calloc((size_t)(n + 31) / 32, 4);
    lw_grammar *g = NULL;
    CHECK(lw_grammar_from_json_schema(NULL, 0, v, NULL, &g) == LW_OK);
    /* cold: first mask inside a string (almost every token allowed: the most expensive walk) */
    const char *pre = "{\"key\": \"val";
    CHECK(lw_grammar_accept_text(g, pre, strlen(pre)) == LW_OK);
    double t0 = now();
    CHECK(lw_grammar_mask(g, bits, (size_t)(n + 31) / 32) == LW_OK);
    double cold = now() - t0;
    int allowed = 0;
    for (int32_t t = 0; t < n; t++) allowed += (int)(bits[t >> 5] >> (t & 31) & 1);
    t0 = now();
    for (int i = 0; i < 100; i++) lw_grammar_mask(g, bits, (size_t)(n + 31) / 32);
    double warm = (now() - t0) / 100;
    /* the sampler's own work for scale: greedy over n logits, with and without the grammar */
    float *logits = malloc(sizeof(float) * (size_t)n);
    for (int32_t t = 0; t < n; t++) logits[t] = (float)(rnd() % 10000) / 100.0f;
    lw_sampler_params sp = lw_sampler_default_params();
    lw_sampler *s;
    lw_sampler_create(n, &sp, NULL, &s);
    t0 = now();
    for (int i = 0; i < 100; i++) lw_sampler_sample(s, logits);
    double plain = (now() - t0) / 100;
    lw_sampler_set_grammar(s, g);
    t0 = now();
    for (int i = 0; i < 100; i++) lw_sampler_sample(s, logits);
    double with = (now() - t0) / 100;
    /* the sampler picks only allowed tokens, greedy or not, however the logits favour others */
    for (int i = 0; i < 200; i++) {
        for (int32_t t = 0; t < n; t++) logits[t] = (float)(rnd() % 10000) / 100.0f;
        logits[rnd() % (uint32_t)n] = 1e4f;
        int32_t id = lw_sampler_sample(s, logits);
        CHECK(id >= 0 && id < n && (bits[id >> 5] >> (id & 31) & 1));
    }
    printf("%s: %d tokens; JSON string state (%d allowed): first mask %.2f ms (trie walk), cached %.1f us; "
           "sampling (temp 0.8, top-k 40) %.2f ms plain, %.2f ms with the grammar\n",
           vname, n, allowed, 1e3 * cold, 1e6 * warm, 1e3 * plain, 1e3 * with);
    lw_sampler_free(s);
    free(logits);
    lw_grammar_free(g);
    free(bits);
}

int main(void) {
    vocab_file spm, big;
    if (!open_vocab("ggml-vocab-llama-spm.gguf", &spm)) test_skip("no ../shared/vocab/ggml-vocab-llama-spm.gguf");
    const char *e = getenv("LW_GRAMMAR_WALKS");
    char log_path[512];
    snprintf(log_path, sizeof log_path, "mkdir -p '%s'", test_tmp_dir());
    if (system(log_path) != 0) printf("note: cannot make %s\n", test_tmp_dir());
    snprintf(log_path, sizeof log_path, "%s/grammar-walks.jsonl", test_tmp_dir());
    walk_log = fopen(log_path, "w");
    char *invalid = "\"not an integer\"";
    log_outputs("self-check", "{\"type\":\"integer\"}", &invalid, 1); /* the validator must catch this one */
    int n_walks = e && atoi(e) > 0 ? atoi(e) : 40;

    /* masks against brute force */
    check_mask(spm.v, "root ::= \"yes\" | \"no\"", "");
    check_mask(spm.v, "root ::= \"yes\" | \"no\"", "y");
    check_mask(spm.v, "root ::= [a-z]+ (\" \" [a-z]+)*", "hello");
    check_mask(spm.v, "root ::= \"\xe6\x97\xa5\xe6\x9c\xac\" [0-9]*", "");
    check_mask(spm.v, "root ::= \"\xe6\x97\xa5\xe6\x9c\xac\" [0-9]*", "\xe6\x97");
    check_mask(spm.v, "root ::= [^a-z]* \"end\"", " 12 ");
    {
        char *j = NULL;
        size_t jl = 0;
        CHECK(lw_json_schema_to_gbnf(NULL, 0, NULL, &j, &jl, NULL, 0) == LW_OK);
        check_mask(spm.v, j, "{\"a\": [1, \"x");
        check_mask(spm.v, j, "{\"a\": [1, 2");
        lw_grammar_text_free(NULL, j);
    }

    test_walks(spm.v, "spm-32k", n_walks);
    test_speed(spm.v, "spm-32k");
    if (open_vocab("ggml-vocab-deepseek-llm.gguf", &big)) {
        check_mask(big.v, "root ::= \"yes\" | \"no\"", "");
        test_walks(big.v, "bpe-100k", n_walks / 4 > 0 ? n_walks / 4 : 1);
        test_speed(big.v, "bpe-100k");
        close_vocab(&big);
    } else {
        printf("note: no deepseek-llm vocabulary: the ~100k measurement is skipped\n");
    }
    close_vocab(&spm);
    if (walk_log) {
        fclose(walk_log);
        int bad = jsonschema_validate_log(log_path);
        if (bad < 0) printf("note: python3 jsonschema not installed: schema outputs checked as JSON only\n");
        else printf("jsonschema: %d schema outputs validated, %d invalid (1 expected: the self-check)\n", walk_log_n, bad);
        CHECK_MSG(bad <= 1, "%d outputs fail jsonschema validation", bad - 1);
        CHECK_MSG(bad != 0, "the validator missed the self-check output");
    }
    return test_summary("test-grammar-vocab");
}
