/* GBNF grammars without a vocabulary: every rule form matched against texts (accepted as a whole, as a
 * prefix only, or refused), hostile grammars refused cleanly with a message, JSON Schema -> GBNF shapes, and
 * allocation failures (every Nth allocation fails: no leak, no crash); integer ranges (minimum, maximum,
 * exclusive bounds) against every integer of a window around them. */
#include "test.h"

#include "llamaweb.h"

#include <limits.h>
#include <stdint.h>

/* 2: the grammar accepts text as a whole; 1: only as a prefix; 0: refuses it; -1: the grammar fails. */
static int match(const char *gbnf, const char *text) {
    lw_grammar *g = NULL;
    lw_status st = lw_grammar_parse(gbnf, strlen(gbnf), NULL, NULL, NULL, &g);
    if (st != LW_OK) {
        fprintf(stderr, "grammar failed: %s\n", lw_grammar_error(g));
        lw_grammar_free(g);
        return -1;
    }
    int r = 0;
    if (lw_grammar_accept_text(g, text, strlen(text)) == LW_OK) r = lw_grammar_is_complete(g) ? 2 : 1;
    lw_grammar_free(g);
    return r;
}

#define WHOLE(gr, t)  CHECK_MSG(match(gr, t) == 2, "%s  /  %s", gr, t)
#define PREFIX(gr, t) CHECK_MSG(match(gr, t) == 1, "%s  /  %s", gr, t)
#define NO(gr, t)     CHECK_MSG(match(gr, t) == 0, "%s  /  %s", gr, t)

static void test_rule_forms(void) {
    /* literals, sequences, alternatives */
    WHOLE("root ::= \"yes\" | \"no\"", "yes");
    WHOLE("root ::= \"yes\" | \"no\"", "no");
    PREFIX("root ::= \"yes\" | \"no\"", "ye");
    NO("root ::= \"yes\" | \"no\"", "yess");
    NO("root ::= \"yes\" | \"no\"", "n0");
    WHOLE("root ::= \"a\" \"b\" c\nc ::= \"c\"", "abc");
    /* groups */
    WHOLE("root ::= (\"a\" | \"b\") \"c\"", "bc");
    WHOLE("root ::= ( \"a\"\n  | \"b\" )\n", "a");
    /* repetition */
    WHOLE("root ::= \"a\"*", "");
    WHOLE("root ::= \"a\"*", "aaaa");
    NO("root ::= \"a\"+", "b");
    PREFIX("root ::= \"a\"+", "");
    WHOLE("root ::= \"a\"+ \"b\"", "aaab");
    WHOLE("root ::= \"a\"? \"b\"", "b");
    WHOLE("root ::= \"a\"? \"b\"", "ab");
    NO("root ::= \"a\"? \"b\"", "aab");
    WHOLE("root ::= \"ab\"{2}", "abab");
    PREFIX("root ::= \"ab\"{2}", "aba");
    NO("root ::= \"ab\"{2}", "ababa");
    WHOLE("root ::= [0-9]{2,4}", "12");
    WHOLE("root ::= [0-9]{2,4}", "1234");
    NO("root ::= [0-9]{2,4}", "12345");
    PREFIX("root ::= [0-9]{2,4}", "1");
    WHOLE("root ::= [0-9]{2,}", "123456789");
    PREFIX("root ::= [0-9]{2,}", "1");
    WHOLE("root ::= [0-9]{0,2} \"x\"", "x");
    WHOLE("root ::= \"a\"{0} \"x\"", "x");
    WHOLE("root ::= (\"a\" | \"bc\"){1,3}", "bcabc");
    WHOLE("root ::= [a]{ 1 , 2 }", "aa");
    /* classes, ranges, negation, any */
    WHOLE("root ::= [a-cx]+", "abcx");
    NO("root ::= [a-cx]+", "d");
    WHOLE("root ::= [^a-c]", "d");
    NO("root ::= [^a-c]", "b");
    WHOLE("root ::= [^\"\\\\]*", "hello world");
    NO("root ::= [^\"\\\\]*", "a\"");
    WHOLE("root ::= [-a]+", "-a-");
    WHOLE("root ::= [a-]+", "a-");
    WHOLE("root ::= . . .", "x\xc3\xa9z");
    NO("root ::= . .", "\xc3\xa9\xc3\xa9\xc3\xa9");
    WHOLE("root ::= [\\]\\[]+", "][");
    /* escapes and UTF-8 */
    WHOLE("root ::= \"\\x41\\u00e9\\U0001F600\\n\\t\\\\\\\"\"", "A\xc3\xa9\xf0\x9f\x98\x80\n\t\\\"");
    WHOLE("root ::= [\\u0400-\\u04FF]+", "\xd0\x9f\xd1\x80\xd0\xb8");
    NO("root ::= [\\u0400-\\u04FF]+", "\xc3\xa9");
    WHOLE("root ::= \"\xe6\x97\xa5\xe6\x9c\xac\"", "\xe6\x97\xa5\xe6\x9c\xac");
    PREFIX("root ::= \"\xe6\x97\xa5\"", "\xe6\x97"); /* half a character: still a prefix */
    NO("root ::= \"\xe6\x97\xa5\"", "\xe6\x98");
    NO("root ::= .", "\xc0\x80");       /* overlong */
    NO("root ::= .", "\xed\xa0\x80");   /* surrogate */
    NO("root ::= .", "\x80");           /* lone continuation */
    /* comments, names, blank lines, recursion (not on the left) */
    WHOLE("# a comment\nroot ::= item-list # trailing\n\nitem-list ::= item (\",\" item)*\nitem ::= [a-z_0-9]+\n",
          "ab,c_1,d");
    WHOLE("root ::= \"(\" root \")\" | \"x\"", "(((x)))");
    PREFIX("root ::= \"(\" root \")\" | \"x\"", "((x)");
    /* nullable rules in front */
    WHOLE("root ::= a b \"c\"\na ::= \"a\"?\nb ::= \"b\"*", "c");
    WHOLE("root ::= a b \"c\"\na ::= \"a\"?\nb ::= \"b\"*", "abbc");
    /* a different root */
    lw_grammar *g = NULL;
    const char *two = "root ::= \"a\"\nother ::= \"b\"";
    CHECK(lw_grammar_parse(two, strlen(two), "other", NULL, NULL, &g) == LW_OK);
    CHECK(lw_grammar_accept_text(g, "b", 1) == LW_OK && lw_grammar_is_complete(g) && lw_grammar_is_finished(g));
    CHECK(lw_grammar_accept_text(g, "b", 1) == LW_ERR_INVALID_ARG);
    CHECK(lw_grammar_reset(g) == LW_OK && !lw_grammar_is_complete(g));
    CHECK(lw_grammar_accept_text(g, "a", 1) == LW_ERR_INVALID_ARG && strstr(lw_grammar_error(g), "not allowed"));
    lw_grammar_free(g);
}

/* Each must fail with a status and a message, quickly. */
static void test_hostile(void) {
    static const char *bad[] = {
        "",                                     /* empty */
        "root ::= \"abc",                       /* unterminated */
        "root ::= [abc",                        /* unterminated class */
        "root ::= [z-a]",                       /* reversed range */
        "root ::= \"\\q\"",                     /* unknown escape */
        "root ::= \"\\xZZ\"",                   /* bad hex */
        "root ::= \"\\U00110000\"",             /* past U+10FFFF */
        "root ::= (\"a\"",                      /* unclosed group */
        "root ::= \"a\")",                      /* stray ) */
        "root ::= missing",                     /* undefined rule */
        "root ::= root \"a\"",                  /* left recursion */
        "root ::= a\na ::= b \"x\"\nb ::= \"y\"? root", /* indirect, through a nullable */
        "root ::= \"a\"\nroot ::= \"b\"",       /* defined twice */
        "root ::= *",                           /* repetition of nothing */
        "root ::= \"a\"{3,2}",                  /* n < m */
        "root ::= \"a\"{100001}",               /* over the repeat limit */
        "root ::= \"a\"{99999999999999999999}", /* number overflow */
        "root ::= \"a\"{2",                     /* unclosed braces */
        "root ::= \"abcdefghijklmnopqrst\"{100000}", /* over the element limit */
        "root := \"a\"",                        /* bad ::= */
        "root ::= \"a\" ::= \"b\"",             /* two on one line */
        "other ::= \"a\"",                      /* no root */
        "root ::= \"\xff\"",                    /* invalid UTF-8 */
        "root ::= (\"a\" | \"b\")\n| \"c\"",    /* | at the start of a line, outside a group */
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        lw_grammar *g = NULL;
        lw_status st = lw_grammar_parse(bad[i], strlen(bad[i]), NULL, NULL, NULL, &g);
        CHECK_MSG(st != LW_OK && g && lw_grammar_error(g)[0], "grammar %zu (%s) gave %d", i, bad[i], (int)st);
        lw_grammar_free(g);
    }
    /* deep nesting, and a long chain of references (no recursion in the checks) */
    size_t n = 100000;
    char *deep = malloc(2 * n + 32);
    memcpy(deep, "root ::= ", 9);
    for (size_t i = 0; i < n; i++) deep[9 + i] = '(';
    deep[9 + n] = 0;
    lw_grammar *g = NULL;
    CHECK(lw_grammar_parse(deep, strlen(deep), NULL, NULL, NULL, &g) == LW_ERR_TOO_LARGE);
    lw_grammar_free(g);
    free(deep);
    size_t cap = 64 * 20000;
    char *chain = malloc(cap), *p = chain;
    for (int i = 0; i < 20000; i++) p += sprintf(p, i == 0 ? "root ::= r1\n" : "r%d ::= \"x\"? r%d\n", i, i + 1);
    sprintf(p, "r20000 ::= \"y\"\n");
    g = NULL;
    CHECK(lw_grammar_parse(chain, strlen(chain), NULL, NULL, NULL, &g) == LW_OK);
    CHECK(g && lw_grammar_accept_text(g, "xxy", 3) == LW_OK && lw_grammar_is_complete(g));
    lw_grammar_free(g);
    /* the same chain closed into a loop through nullables: left recursion */
    p = chain;
    for (int i = 0; i < 2000; i++) p += sprintf(p, i == 0 ? "root ::= r1\n" : "r%d ::= \"x\"? r%d\n", i, i + 1);
    sprintf(p, "r2000 ::= \"y\"? root\n");
    g = NULL;
    CHECK(lw_grammar_parse(chain, strlen(chain), NULL, NULL, NULL, &g) == LW_ERR_BAD_STRING);
    CHECK(g && strstr(lw_grammar_error(g), "left recursion"));
    lw_grammar_free(g);
    free(chain);
    /* a very ambiguous grammar still matches (sets of stacks are deduplicated) */
    WHOLE("root ::= (\"a\" | \"a\" | [a-z] | .)*", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa");
    WHOLE("root ::= x*\nx ::= \"a\"? \"a\"? \"a\"? \"a\"? \"a\"? \"b\"", "aaababbaaaaab");
    /* a repeated item that can be empty counts as left recursion (as in llama.cpp) */
    CHECK(match("root ::= x*\nx ::= \"a\"?", "a") == -1);
}

/* Counts allocations; fails the Nth. */
typedef struct failing {
    long n, fail_at;
    long live;
} failing;
static void *f_malloc(void *u, size_t n) {
    failing *f = u;
    if (++f->n == f->fail_at) return NULL;
    void *p = malloc(n ? n : 1);
    if (p) f->live++;
    return p;
}
static void *f_realloc(void *u, void *p, size_t n) {
    failing *f = u;
    if (++f->n == f->fail_at) return NULL;
    void *q = realloc(p, n ? n : 1);
    if (q && !p) f->live++;
    return q;
}
static void f_free(void *u, void *p) {
    failing *f = u;
    if (p) f->live--;
    free(p);
}

static void test_alloc_failures(void) {
    const char *schema = "{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"string\"},\"b\":{\"type\":\"array\","
                         "\"items\":{\"type\":\"integer\"},\"maxItems\":3}},\"required\":[\"a\"]}";
    int ok_seen = 0;
    for (long k = 1; k < 400 && !ok_seen; k++) {
        failing f = {0, k, 0};
        lw_allocator a = {f_malloc, f_realloc, f_free, &f};
        lw_grammar *g = NULL;
        lw_status st = lw_grammar_from_json_schema(schema, strlen(schema), NULL, &a, &g);
        if (st == LW_OK) {
            const char *doc = "{\"a\": \"x\", \"b\": [1, 2]}";
            st = lw_grammar_accept_text(g, doc, strlen(doc));
            ok_seen = st == LW_OK && lw_grammar_is_complete(g);
        } else {
            CHECK_MSG(st == LW_ERR_NOMEM || st == LW_ERR_TOO_LARGE, "fail at %ld: %d", k, (int)st);
        }
        lw_grammar_free(g);
        CHECK_MSG(f.live == 0, "fail at %ld: %ld blocks leaked", k, f.live);
    }
    CHECK(ok_seen);
}

/* JSON Schema -> GBNF: valid and invalid documents as text, no vocabulary. */
static int schema_match(const char *schema, const char *text) {
    lw_grammar *g = NULL;
    lw_status st = lw_grammar_from_json_schema(schema, schema ? strlen(schema) : 0, NULL, NULL, &g);
    if (st != LW_OK) {
        fprintf(stderr, "schema failed: %s\n", lw_grammar_error(g));
        lw_grammar_free(g);
        return -1;
    }
    int r = lw_grammar_accept_text(g, text, strlen(text)) == LW_OK ? (lw_grammar_is_complete(g) ? 2 : 1) : 0;
    lw_grammar_free(g);
    return r;
}

/* Integer ranges: every integer of a window around the bounds is accepted exactly when it lies in the range
 * (one grammar per schema, reset per text), and spellings JSON does not allow are refused. */
static void test_integer_ranges(void) {
    static const struct {
        const char *bounds; /* the schema's members besides "type" */
        long long lo, hi;   /* the integers allowed (LLONG_MIN / LLONG_MAX: no bound) */
        long long from, to; /* the window tried */
    } cases[] = {
        {"\"minimum\":0,\"maximum\":30", 0, 30, -40, 140},
        {"\"minimum\":-5,\"maximum\":5", -5, 5, -120, 120},
        {"\"minimum\":7", 7, LLONG_MAX, -30, 1200},
        {"\"maximum\":-7", LLONG_MIN, -7, -1200, 30},
        {"\"maximum\":250", LLONG_MIN, 250, -1100, 1100},
        {"\"minimum\":-250", -250, LLONG_MAX, -1100, 1100},
        {"\"minimum\":17,\"maximum\":1234", 17, 1234, -20, 2100},
        {"\"minimum\":-1234,\"maximum\":-17", -1234, -17, -2100, 20},
        {"\"minimum\":-99,\"maximum\":1000", -99, 1000, -1100, 1100},
        {"\"exclusiveMinimum\":0,\"exclusiveMaximum\":10", 1, 9, -20, 120},
        {"\"minimum\":2.5,\"maximum\":9.5", 3, 9, -20, 120},
        {"\"minimum\":-2.5,\"maximum\":-0.5", -2, -1, -120, 120},
        {"\"minimum\":5,\"exclusiveMinimum\":true,\"maximum\":9,\"exclusiveMaximum\":true", 6, 8, -20, 120},
        {"\"minimum\":3,\"maximum\":3", 3, 3, -20, 120},
        {"\"minimum\":0,\"maximum\":0", 0, 0, -20, 120},
        {"\"minimum\":999,\"maximum\":1001", 999, 1001, 900, 1100},
        {"\"minimum\":1000000000000,\"maximum\":1000000000100", 1000000000000LL, 1000000000100LL,
         999999999900LL, 1000000000200LL},
        {"\"minimum\":-1e30", LLONG_MIN, LLONG_MAX, -200, 200},
    };
    char schema[256], text[64];
    long long checked = 0;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        snprintf(schema, sizeof schema, "{\"type\":\"integer\",%s}", cases[i].bounds);
        lw_grammar *g = NULL;
        CHECK_MSG(lw_grammar_from_json_schema(schema, strlen(schema), NULL, NULL, &g) == LW_OK, "%s: %s",
                  schema, lw_grammar_error(g));
        for (long long v = cases[i].from; g && v <= cases[i].to; v++) {
            snprintf(text, sizeof text, "%lld", v);
            lw_grammar_reset(g);
            const int whole =
                lw_grammar_accept_text(g, text, strlen(text)) == LW_OK && lw_grammar_is_complete(g);
            const int want = v >= cases[i].lo && v <= cases[i].hi;
            CHECK_MSG(whole == want, "%s: %lld %s", schema, v, want ? "refused" : "accepted");
            checked++;
        }
        static const char *const never[] = {"007", "+1", "1.0", "1e2", "--1", ""};
        for (size_t k = 0; g && k < sizeof never / sizeof never[0]; k++) {
            lw_grammar_reset(g);
            CHECK_MSG(!(lw_grammar_accept_text(g, never[k], strlen(never[k])) == LW_OK &&
                        lw_grammar_is_complete(g)),
                      "%s: '%s' accepted", schema, never[k]);
        }
        lw_grammar_free(g);
    }
    /* a range without integers, and bounds no 16-digit integer reaches, are refused with a message */
    static const char *const bad[] = {"{\"type\":\"integer\",\"minimum\":5,\"maximum\":4}",
                                      "{\"type\":\"integer\",\"minimum\":2.2,\"maximum\":2.8}",
                                      "{\"type\":\"integer\",\"minimum\":1e20}"};
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        lw_grammar *g = NULL;
        CHECK_MSG(lw_grammar_from_json_schema(bad[k], strlen(bad[k]), NULL, NULL, &g) != LW_OK &&
                      lw_grammar_error(g)[0],
                  "%s", bad[k]);
        lw_grammar_free(g);
    }
    printf("integer ranges: %lld integers checked against %zu ranges\n", checked,
           sizeof cases / sizeof cases[0]);
}

static void test_schema_text(void) {
    const char *person = "{\"type\":\"object\",\"properties\":{\"name\":{\"type\":\"string\"},\"age\":{\"type\":\"integer\","
                         "\"minimum\":0},\"tags\":{\"type\":\"array\",\"items\":{\"enum\":[\"a\",\"b\"]},\"minItems\":1,"
                         "\"maxItems\":2},\"ok\":{\"type\":\"boolean\"}},\"required\":[\"name\",\"ok\"]}";
    CHECK(schema_match(person, "{\"name\": \"Ann\", \"ok\": true}") == 2);
    CHECK(schema_match(person, "{\"name\":\"Ann\",\"age\":31,\"tags\":[\"a\",\"b\"],\"ok\":false}") == 2);
    CHECK(schema_match(person, "{\"name\":\"Ann\",\"tags\":[\"b\"],\"ok\":false}") == 2);
    CHECK(schema_match(person, "{\"name\":\"Ann\",\"tags\":[],\"ok\":false}") == 0);          /* minItems */
    CHECK(schema_match(person, "{\"name\":\"Ann\",\"tags\":[\"a\",\"a\",\"a\"]") == 0);       /* maxItems */
    CHECK(schema_match(person, "{\"name\":\"Ann\",\"age\":-1") == 0);                         /* minimum 0 */
    CHECK(schema_match(person, "{\"ok\":true}") == 0);                                        /* required first */
    CHECK(schema_match(person, "{\"name\":\"Ann\"}") == 0);                                   /* ok required */
    CHECK(schema_match(person, "{\"name\":\"A\\u00e9\\\"\",\"ok\":true}") == 2);              /* escapes */
    CHECK(schema_match("{\"const\":{\"k\":[1,\"x\\\"y\"]}}", "{\"k\":[1,\"x\\\"y\"]}") == 2);
    CHECK(schema_match("{\"enum\":[1,\"two\",null,true]}", "\"two\"") == 2);
    CHECK(schema_match("{\"enum\":[1,\"two\",null,true]}", "2") == 0);
    CHECK(schema_match("{\"anyOf\":[{\"type\":\"number\"},{\"type\":\"null\"}]}", "-1.5e3") == 2);
    CHECK(schema_match("{\"oneOf\":[{\"type\":\"number\"},{\"type\":\"null\"}]}", "null") == 2);
    CHECK(schema_match("{\"type\":[\"string\",\"null\"]}", "null") == 2);
    CHECK(schema_match("{\"type\":\"string\",\"minLength\":2,\"maxLength\":3}", "\"ab\"") == 2);
    CHECK(schema_match("{\"type\":\"string\",\"minLength\":2,\"maxLength\":3}", "\"abcd\"") == 0);
    CHECK(schema_match("{\"type\":\"array\",\"prefixItems\":[{\"type\":\"integer\"},{\"type\":\"string\"}]}", "[1, \"x\"]") == 2);
    const char *rec = "{\"$ref\":\"#/$defs/node\",\"$defs\":{\"node\":{\"type\":\"object\",\"properties\":{\"v\":{\"type\":"
                      "\"integer\"},\"next\":{\"anyOf\":[{\"$ref\":\"#/$defs/node\"},{\"type\":\"null\"}]}},\"required\":"
                      "[\"v\",\"next\"]}}}";
    CHECK(schema_match(rec, "{\"v\":1,\"next\":{\"v\":2,\"next\":null}}") == 2);
    CHECK(schema_match("{\"type\":\"object\",\"additionalProperties\":{\"type\":\"integer\"}}", "{\"a\":1,\"b\":2}") == 2);
    CHECK(schema_match("{\"type\":\"object\",\"additionalProperties\":{\"type\":\"integer\"}}", "{\"a\":\"x\"") == 0);
    /* JSON mode: any value */
    CHECK(schema_match(NULL, "{\"a\": [1, 2.5, {\"b\": null}], \"c\": \"\\n\"}") == 2);
    CHECK(schema_match(NULL, "[true, false]") == 2);
    CHECK(schema_match(NULL, "{\"a\" 1}") == 0);
    CHECK(schema_match(NULL, "01") == 0);
    /* refused schemas */
    static const char *bad[] = {"{\"type\":\"string\",\"pattern\":\"^a\"}", "{\"$ref\":\"#/nope\"}", "{\"type\":\"thing\"}",
                                "{\"enum\":[]}", "[1", "{\"a\":1}x", "false", "{\"allOf\":[{},{}]}",
                                "{\"type\":\"array\",\"minItems\":5,\"maxItems\":2}"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        lw_grammar *g = NULL;
        CHECK_MSG(lw_grammar_from_json_schema(bad[i], strlen(bad[i]), NULL, NULL, &g) != LW_OK && lw_grammar_error(g)[0],
                  "%s", bad[i]);
        lw_grammar_free(g);
    }
    /* deep documents are refused, not recursed into */
    char deep[400];
    for (int i = 0; i < 200; i++) deep[i] = '[';
    deep[200] = 0;
    lw_grammar *g = NULL;
    CHECK(lw_grammar_from_json_schema(deep, 200, NULL, NULL, &g) == LW_ERR_TOO_LARGE);
    lw_grammar_free(g);
    /* the text form */
    char *text = NULL, err[128];
    size_t n = 0;
    CHECK(lw_json_schema_to_gbnf(person, strlen(person), NULL, &text, &n, err, sizeof err) == LW_OK);
    CHECK(text && n == strlen(text) && strstr(text, "root ::=") && strstr(text, "space ::="));
    lw_grammar_text_free(NULL, text);
    CHECK(lw_json_schema_to_gbnf("{\"type\":1}", 10, NULL, &text, &n, err, sizeof err) != LW_OK && !text && err[0]);
}

int main(void) {
    test_rule_forms();
    test_hostile();
    test_alloc_failures();
    test_schema_text();
    test_integer_ranges();
    return test_summary("test-grammar");
}
