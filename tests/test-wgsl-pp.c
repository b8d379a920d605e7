/* WGSL template preprocessor: directives, macro expansion, #if expressions (C precedence, short-circuit),
 * nesting, errors with file:line, limits, allocation failures, and every embedded shader expanding for the
 * variants the kernels use. */
#include "test.h"
#include "webgpu/wgsl-pp.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

/* ---------------------------------------------------------------------------------------------------------
 * Helpers
 * ------------------------------------------------------------------------------------------------------- */

static char g_err[LW_ERRMSG_SIZE]; /* message of the last run */

/* Expands files[0] with the other files as includes and the given defines. */
static lw_status run(const lw__wgsl_file *files, size_t n_files, const lw__wgsl_define *defs, size_t n_defs,
                     char **out) {
    lw__wgsl_pp_params p = {files, n_files, defs, n_defs, 0, 0};
    return lw__wgsl_pp(NULL, files[0].name, &p, out, NULL, g_err);
}

/* Expands one text with defines and compares with want (NULL: expect failure with status want_st and a
 * message containing want_msg). */
static void expect_ex(int line, const char *text, const lw__wgsl_define *defs, size_t n_defs,
                      const char *want, lw_status want_st, const char *want_msg) {
    lw__wgsl_file f = {"t.wgsl", text};
    char *out = NULL;
    lw_status st = run(&f, 1, defs, n_defs, &out);
    if (want) {
        CHECK_MSG(st == LW_OK, "line %d: status %s (%s)", line, lw_status_str(st), g_err);
        CHECK_MSG(out && strcmp(out, want) == 0, "line %d: got [%s] want [%s]", line, out ? out : "(null)",
                  want);
    } else {
        CHECK_MSG(st == want_st, "line %d: status %s want %s (%s)", line, lw_status_str(st),
                  lw_status_str(want_st), g_err);
        CHECK_MSG(out == NULL, "line %d: output on failure", line);
        CHECK_MSG(strstr(g_err, want_msg) != NULL, "line %d: message [%s] lacks [%s]", line, g_err, want_msg);
    }
    free(out);
}
#define EXPECT(text, want) expect_ex(__LINE__, text, NULL, 0, want, LW_OK, NULL)
#define EXPECT_D(text, defs, want)                                                                           \
    expect_ex(__LINE__, text, defs, sizeof(defs) / sizeof(defs[0]), want, LW_OK, NULL)
#define EXPECT_ERR(text, st, msg) expect_ex(__LINE__, text, NULL, 0, NULL, st, msg)

/* Value of an #if expression: "1\n" or "0\n" output mapped to 1/0; -1 on error. */
static int cond(const char *expr) {
    char text[512];
    snprintf(text, sizeof text, "#if %s\n1\n#else\n0\n#endif\n", expr);
    lw__wgsl_file f = {"c.wgsl", text};
    char *out = NULL;
    lw_status st = run(&f, 1, NULL, 0, &out);
    int v = st != LW_OK ? -1 : strcmp(out, "1\n") == 0 ? 1 : strcmp(out, "0\n") == 0 ? 0 : -2;
    free(out);
    return v;
}
#define COND(expr, want)                                                                                     \
    CHECK_MSG(cond(expr) == (want), "#if %s: got %d want %d (%s)", expr, cond(expr), want, g_err)

/* ---------------------------------------------------------------------------------------------------------
 * Tests
 * ------------------------------------------------------------------------------------------------------- */

static void test_plain_and_macros(void) {
    EXPECT("", "");
    EXPECT("fn f() {}\n", "fn f() {}\n");
    EXPECT("no newline at end", "no newline at end\n");
    EXPECT("crlf\r\nlines\r\n", "crlf\nlines\n");
    EXPECT("#define N 4\nvar<workgroup> s: array<f32, N>;\n", "var<workgroup> s: array<f32, 4>;\n");
    /* identifiers only: NX, N_, xN, 4N, 1e5 and a u suffix stay */
    EXPECT("#define N 4\n#define u 9\n#define e 7\nN NX N_ xN (N) N+N 0x1Nu 1e5 2u\n",
           "4 NX N_ xN (4) 4+4 0x1Nu 1e5 2u\n");
    /* recursive expansion, in definition order independent of use */
    EXPECT("#define A B+1\n#define B C*2\n#define C 3\nA\n", "3*2+1\n");
    /* self reference does not loop (C rule); mutual reference stops at the first repeat */
    EXPECT("#define X X+1\nX\n", "X+1\n");
    EXPECT("#define P Q\n#define Q P\nP Q\n", "P Q\n");
    /* empty value, comments in a define are not part of the value */
    EXPECT("#define E\n#define V 3 // three\n#define W /* c */ 5\n[E] V W\n", "[] 3 5\n");
    /* macros are not replaced inside // comments of text lines */
    EXPECT("#define N 4\nN // N stays\n", "4 // N stays\n");
    /* undef, and redefinition after undef */
    EXPECT("#define N 1\nN\n#undef N\nN\n#define N 2\nN\n#undef NEVER_DEFINED\n", "1\nN\n2\n");
    /* same value again is fine (surrounding blanks ignored) */
    EXPECT("#define N 1\n#define N   1  \nN\n", "1\n");
    /* directives may be indented and spaced after '#' */
    EXPECT("  #  define N 7\n\t#if N == 7\nok\n  #endif\n", "ok\n");
    /* continuation lines */
    EXPECT("#define LONG 1 + \\\n  2\nLONG\n#if LONG == \\\n 3\nthree\n#endif\nafter\n",
           "1 +   2\nthree\nafter\n");
    /* null directive */
    EXPECT("#\nx\n", "x\n");

    lw__wgsl_define d[] = {
        {"WEIGHT_TYPE", "Q4_0"}, {"Q4_0", "2"}, {"F16", "1"}, {"WG_SIZE", "256"}, {"EMPTY", NULL}};
    EXPECT_D("@workgroup_size(WG_SIZE)\n#if WEIGHT_TYPE == 2 && F16\nq4 f16\n#endif\n[EMPTY]\n", d,
             "@workgroup_size(256)\nq4 f16\n[]\n");
}

static void test_conditionals(void) {
    EXPECT("#if 1\na\n#else\nb\n#endif\n", "a\n");
    EXPECT("#if 0\na\n#else\nb\n#endif\n", "b\n");
    EXPECT("#if 0\na\n#elif 0\nb\n#elif 1\nc\n#elif 1\nd\n#else\ne\n#endif\n", "c\n");
    EXPECT("#if 0\na\n#elif 0\nb\n#else\ne\n#endif\n", "e\n");
    EXPECT("#define A\n#ifdef A\nyes\n#endif\n#ifndef A\nno\n#endif\n#ifdef B\nno\n#else\nyes2\n#endif\n",
           "yes\nyes2\n");
    /* nesting: inner branches of a false outer branch never activate */
    EXPECT("#if 0\n#if 1\na\n#else\nb\n#endif\n#elif 1\n#if 0\nc\n#elif 1\nd\n#endif\n#endif\n", "d\n");
    EXPECT("#if 1\n#if 0\na\n#else\n#ifdef X\nb\n#else\nc\n#endif\n#endif\n#endif\n", "c\n");
    /* false branches skip bad syntax, unknown directives, #error, bad includes, bad expressions */
    EXPECT("#if 0\n#error not reached\n#include \"missing\"\n#bogus\n#if 1 +* 2\n#endif\n#define F(x) x\n"
           "#elif 0 && UNDEFINED_X\n#else\nok\n#endif\n",
           "ok\n");
    /* #elif after a taken branch is not evaluated (so an undefined name there is fine) */
    EXPECT("#if 1\na\n#elif UNDEFINED_NAME\nb\n#endif\n", "a\n");
    /* defines inside false branches do not happen */
    EXPECT("#if 0\n#define N 1\n#endif\n#ifdef N\nbad\n#else\ngood\n#endif\n", "good\n");
    /* deep nesting up to the limit works */
    char deep[LW_WGSL_PP_MAX_COND * 16 + 64], *w = deep;
    for (unsigned i = 0; i < LW_WGSL_PP_MAX_COND; i++) w += sprintf(w, "#if 1\n");
    w += sprintf(w, "x\n");
    for (unsigned i = 0; i < LW_WGSL_PP_MAX_COND; i++) w += sprintf(w, "#endif\n");
    EXPECT(deep, "x\n");
    w = deep;
    for (unsigned i = 0; i < LW_WGSL_PP_MAX_COND + 1; i++) w += sprintf(w, "#if 1\n");
    EXPECT_ERR(deep, LW_ERR_TOO_LARGE, "nested deeper");
}

static void test_expressions(void) {
    COND("1", 1);
    COND("0", 0);
    COND("2 + 3 * 4 == 14", 1); /* * binds tighter than + */
    COND("(2 + 3) * 4 == 20", 1);
    COND("10 - 4 - 3 == 3", 1); /* left associative */
    COND("100 / 10 / 5 == 2", 1);
    COND("17 % 5 == 2", 1);
    COND("-7 / 2 == -3", 1); /* C truncation */
    COND("-7 % 2 == -1", 1);
    COND("1 << 4 + 1 == 32", 1); /* + binds tighter than << */
    COND("256 >> 2 == 64", 1);
    COND("-16 >> 2 == -4", 1); /* arithmetic shift */
    COND("1 < 2 == 1", 1);     /* relational before equality */
    COND("3 > 2 > 1", 0);      /* (3 > 2) > 1 = 1 > 1 */
    COND("2 <= 2 && 2 >= 2 && 1 != 2", 1);
    COND("6 & 3 == 2", 0); /* == binds tighter than &: 6 & (3 == 2) */
    COND("(6 & 3) == 2", 1);
    COND("(1 | 2 ^ 3 & 5) == (1 | (2 ^ (3 & 5)))", 1); /* & before ^ before | */
    COND("(1 | 2 ^ 3 & 5) == 3", 1);
    COND("0 || 0 && 1", 0); /* && before || */
    COND("1 || 0 && 0", 1);
    COND("!0 && !!5 && ~0 == -1", 1);
    COND("- - 3 == 3 && +3 == 3", 1);
    COND("0x10 == 16 && 0XfF == 255 && 8u == 8", 1);
    COND("9223372036854775807 > 0", 1);
    COND("1 ? 2 : 0", 1);
    COND("0 ? 1 : 0 ? 1 : 0", 0); /* right associative ?: */
    COND("(1 ? 5 : 7) == 5 && (0 ? 5 : 7) == 7", 1);
    COND("((((((1))))))", 1);
    /* defined, with and without parentheses */
    lw__wgsl_define d[] = {{"F16", "1"}, {"ZERO", "0"}, {"SUM", "F16 + 1"}};
    EXPECT_D("#if defined(F16) && defined ZERO && !defined(NOPE) && SUM == 2\nok\n#endif\n", d, "ok\n");
    EXPECT_D("#if defined ( F16 ) && ZERO == 0\nok\n#endif\n", d, "ok\n");
    /* short-circuit: the unevaluated side may name undefined macros and divide by zero */
    COND("defined(F16) && F16", 0);
    COND("0 && (1 / 0)", 0);
    COND("1 || (1 % 0)", 1);
    COND("0 ? 1 / 0 : 5", 1);
    COND("1 ? 5 : UNDEFINED", 1);
    /* errors */
    COND("UNDEFINED_NAME", -1);
    CHECK(strstr(g_err, "'UNDEFINED_NAME' is not defined") != NULL);
    COND("1 / 0", -1);
    CHECK(strstr(g_err, "division by zero") != NULL);
    COND("1 % 0", -1);
    COND("1 << 64", -1);
    COND("1 << -1", -1);
    COND("1 +", -1);
    COND("(1", -1);
    COND("1)", -1);
    COND("1 2", -1);
    COND("1 ? 2", -1);
    COND("1.5", -1);
    COND("99999999999999999999", -1);
    COND("9223372036854775808", -1);
    COND("defined", -1);
    COND("defined(", -1);
    COND("defined(X", -1);
    COND("1 == = 1", -1);
    COND("", -1);
    CHECK(strstr(g_err, "no expression") != NULL);
    /* wrapping arithmetic is defined, not undefined behaviour (runs under UBSAN) */
    COND("9223372036854775807 + 1 < 0", 1);
    COND("-9223372036854775807 - 1 == (-9223372036854775807 - 1) / -1", 1);
    COND("(-9223372036854775807 - 1) % -1 == 0", 1);
    COND("9223372036854775807 * 2 == -2", 1);
    /* nesting limit guards the C stack */
    char deep[1200];
    memset(deep, '!', 1000);
    strcpy(deep + 1000, "0");
    COND(deep, -1);
    CHECK(strstr(g_err, "nested deeper") != NULL);
    memset(deep, '(', 600);
    deep[600] = '\0';
    COND(deep, -1);
}

static void test_includes(void) {
    lw__wgsl_file files[] = {
        {"main.wgsl", "#include \"common.wgsl\"\n#include \"common.wgsl\"\nmain N\n#include \"leaf.wgsl\"\n"},
        {"common.wgsl", "#pragma once\n#define N 8\ncommon\n#include \"leaf.wgsl\"\n"},
        {"leaf.wgsl", "leaf\n"},
    };
    char *out = NULL;
    lw_status st = run(files, 3, NULL, 0, &out);
    CHECK_MSG(st == LW_OK, "%s", g_err);
    CHECK_MSG(out && strcmp(out, "common\nleaf\nmain 8\nleaf\n") == 0, "[%s]", out ? out : "");
    free(out);

    /* errors inside an include name the included file and its line */
    lw__wgsl_file bad[] = {{"a.wgsl", "x\n#include \"b.wgsl\"\n"}, {"b.wgsl", "ok\n\n#if 1 +\n#endif\n"}};
    out = NULL;
    st = run(bad, 2, NULL, 0, &out);
    CHECK(st == LW_ERR_INVALID_ARG && out == NULL);
    CHECK_MSG(strstr(g_err, "b.wgsl:3:") != NULL, "%s", g_err);

    lw__wgsl_file missing[] = {{"a.wgsl", "\n#include \"nope.wgsl\"\n"}};
    st = run(missing, 1, NULL, 0, &out);
    CHECK(st == LW_ERR_NOT_FOUND);
    CHECK_MSG(strstr(g_err, "a.wgsl:2:") && strstr(g_err, "nope.wgsl"), "%s", g_err);

    lw__wgsl_file cyc[] = {{"a.wgsl", "#include \"b.wgsl\"\n"}, {"b.wgsl", "#include \"a.wgsl\"\n"}};
    st = run(cyc, 2, NULL, 0, &out);
    CHECK_MSG(st == LW_ERR_TOO_LARGE && strstr(g_err, "circular"), "%s %s", lw_status_str(st), g_err);

    /* an include can be guarded by #ifndef as in C, and defines flow both ways */
    lw__wgsl_file guard[] = {{"a.wgsl", "#define IN 1\n#include \"g.wgsl\"\n#include \"g.wgsl\"\nG\n"},
                             {"g.wgsl", "#ifndef G\n#define G IN\ng\n#endif\n"}};
    st = run(guard, 2, NULL, 0, &out);
    CHECK_MSG(st == LW_OK && strcmp(out, "g\n1\n") == 0, "%s [%s]", g_err, out ? out : "");
    free(out);

    /* conditionals must balance within a file */
    lw__wgsl_file unbal[] = {{"a.wgsl", "#if 1\n#include \"u.wgsl\"\n"}, {"u.wgsl", "#endif\n"}};
    st = run(unbal, 2, NULL, 0, &out);
    CHECK_MSG(st == LW_ERR_INVALID_ARG && strstr(g_err, "u.wgsl:1: #endif without #if"), "%s", g_err);

    /* the include depth limit is configurable */
    lw__wgsl_file chain[] = {
        {"0", "#include \"1\"\n"}, {"1", "#include \"2\"\n"}, {"2", "#include \"3\"\n"}, {"3", "z\n"}};
    lw__wgsl_pp_params p = {chain, 4, NULL, 0, 0, 3};
    st = lw__wgsl_pp(NULL, "0", &p, &out, NULL, g_err);
    CHECK(st == LW_OK && strcmp(out, "z\n") == 0);
    free(out);
    p.max_depth = 2;
    st = lw__wgsl_pp(NULL, "0", &p, &out, NULL, g_err);
    CHECK(st == LW_ERR_TOO_LARGE && out == NULL);
    st = lw__wgsl_pp(NULL, "absent", &p, &out, NULL, g_err);
    CHECK(st == LW_ERR_NOT_FOUND);
}

static void test_errors(void) {
    EXPECT_ERR("a\n#endif\n", LW_ERR_INVALID_ARG, "t.wgsl:2: #endif without #if");
    EXPECT_ERR("#else\n", LW_ERR_INVALID_ARG, "#else without #if");
    EXPECT_ERR("#elif 1\n", LW_ERR_INVALID_ARG, "#elif without #if");
    EXPECT_ERR("\n\n#if 1\n", LW_ERR_INVALID_ARG, "t.wgsl:3: unterminated #if");
    EXPECT_ERR("#if 1\n#else\n#else\n#endif\n", LW_ERR_INVALID_ARG, "t.wgsl:3: #else after #else (line 1)");
    EXPECT_ERR("#if 0\n#else\n#elif 1\n#endif\n", LW_ERR_INVALID_ARG, "#elif after #else");
    EXPECT_ERR("#if 1\n#endif junk\n", LW_ERR_INVALID_ARG, "junk after #endif");
    EXPECT_ERR("#ifdef\n#endif\n", LW_ERR_INVALID_ARG, "#ifdef needs a name");
    EXPECT_ERR("#ifdef A B\n#endif\n", LW_ERR_INVALID_ARG, "junk after #ifdef");
    EXPECT_ERR("#define\n", LW_ERR_INVALID_ARG, "#define needs a name");
    EXPECT_ERR("#define F(x) x\n", LW_ERR_INVALID_ARG, "function-like macros are not supported");
    EXPECT_ERR("#define defined 1\n", LW_ERR_INVALID_ARG, "'defined' cannot be a macro name");
    EXPECT_ERR("#define N 1\n#define N 2\n", LW_ERR_INVALID_ARG, "t.wgsl:2: 'N' redefined as '2' (was '1'");
    EXPECT_ERR("#undef\n", LW_ERR_INVALID_ARG, "#undef needs a name");
    EXPECT_ERR("x\n#error WEIGHT_TYPE 7 is not supported\n", LW_ERR_UNSUPPORTED,
               "t.wgsl:2: #error WEIGHT_TYPE 7 is not supported");
    EXPECT_ERR("#include nope\n", LW_ERR_INVALID_ARG, "#include expects \"name\"");
    EXPECT_ERR("#include \"t.wgsl\" x\n", LW_ERR_INVALID_ARG, "junk after #include");
    EXPECT_ERR("#pragma twice\n", LW_ERR_INVALID_ARG, "unknown #pragma 'twice'");
    EXPECT_ERR("#frobnicate\n", LW_ERR_INVALID_ARG, "t.wgsl:1: unknown directive #frobnicate");
    EXPECT_ERR("#1\n", LW_ERR_INVALID_ARG, "bad directive");
    /* line numbers count continuation lines */
    EXPECT_ERR("#define A 1 \\\n + 2\n\n#bad\n", LW_ERR_INVALID_ARG, "t.wgsl:4:");

    /* bad defines from C */
    lw__wgsl_define bad_name[] = {{"1X", "1"}};
    expect_ex(__LINE__, "x\n", bad_name, 1, NULL, LW_ERR_INVALID_ARG, "not a valid macro name");
    lw__wgsl_define bad_name2[] = {{"A-B", "1"}};
    expect_ex(__LINE__, "x\n", bad_name2, 1, NULL, LW_ERR_INVALID_ARG, "not a valid macro name");
    lw__wgsl_define null_name[] = {{NULL, "1"}};
    expect_ex(__LINE__, "x\n", null_name, 1, NULL, LW_ERR_INVALID_ARG, "not a valid macro name");
    lw__wgsl_define nl[] = {{"A", "1\n#error injected"}};
    expect_ex(__LINE__, "x\n", nl, 1, NULL, LW_ERR_INVALID_ARG, "must be one line");
    lw__wgsl_define clash[] = {{"N", "1"}, {"N", "2"}};
    expect_ex(__LINE__, "x\n", clash, 2, NULL, LW_ERR_INVALID_ARG, "redefined");
    /* a template's default must not silently override a define from C */
    lw__wgsl_define wg[] = {{"WG_SIZE", "128"}};
    expect_ex(__LINE__, "#ifndef WG_SIZE\n#define WG_SIZE 64\n#endif\nWG_SIZE\n", wg, 1, "128\n", LW_OK,
              NULL);
    expect_ex(__LINE__, "#define WG_SIZE 64\n", wg, 1, NULL, LW_ERR_INVALID_ARG, "redefined");

    /* NULL arguments */
    char *out = NULL;
    lw__wgsl_pp_params p = {NULL, 0, NULL, 0, 0, 0};
    CHECK(lw__wgsl_pp(NULL, NULL, &p, &out, NULL, g_err) == LW_ERR_INVALID_ARG);
    CHECK(lw__wgsl_pp(NULL, "x", NULL, &out, NULL, g_err) == LW_ERR_INVALID_ARG);
    CHECK(lw__wgsl_pp(NULL, "x", &p, NULL, NULL, NULL) == LW_ERR_INVALID_ARG);
    p.n_files = 1;
    CHECK(lw__wgsl_pp(NULL, "x", &p, &out, NULL, g_err) == LW_ERR_INVALID_ARG);
}

static void test_limits(void) {
    /* output limit, including exponential macro growth (each level doubles) */
    lw__wgsl_file f = {"big.wgsl",
                       "#define A0 xxxxxxxxxxxxxxxx\n#define A1 A0 A0\n#define A2 A1 A1\n#define A3 A2 A2\n"
                       "#define A4 A3 A3\n#define A5 A4 A4\n#define A6 A5 A5\n#define A7 A6 A6\n"
                       "#define A8 A7 A7\n#define A9 A8 A8\nA9 A9 A9 A9\n"};
    lw__wgsl_pp_params p = {&f, 1, NULL, 0, 1000, 0};
    char *out = NULL;
    size_t len = 0;
    lw_status st = lw__wgsl_pp(NULL, "big.wgsl", &p, &out, &len, g_err);
    CHECK_MSG(st == LW_ERR_TOO_LARGE && out == NULL && strstr(g_err, "exceeds 1000 bytes"), "%s", g_err);
    p.max_output = 1 << 20;
    st = lw__wgsl_pp(NULL, "big.wgsl", &p, &out, &len, g_err);
    CHECK(st == LW_OK && len == 4 * 512 * 17); /* 512 copies of 16 x's + separator each, 4 times (+ '\n') */
    free(out);
    /* the same, inside an #if (scratch buffers obey the limit too) */
    lw__wgsl_file g = {"big2.wgsl",
                       "#define A0 1+1+1+1+1+1+1+1\n#define A1 A0+A0\n#define A2 A1+A1\n#define A3 A2+A2\n"
                       "#define A4 A3+A3\n#define A5 A4+A4\n#define A6 A5+A5\n#if A6 == 512\nok\n#endif\n"};
    p = (lw__wgsl_pp_params){&g, 1, NULL, 0, 0, 0};
    st = lw__wgsl_pp(NULL, "big2.wgsl", &p, &out, &len, g_err);
    CHECK_MSG(st == LW_OK && strcmp(out, "ok\n") == 0, "%s", g_err);
    free(out);
    p.max_output = 100;
    st = lw__wgsl_pp(NULL, "big2.wgsl", &p, &out, &len, g_err);
    CHECK(st == LW_ERR_TOO_LARGE);
    /* macro nesting limit */
    char chain[LW_WGSL_PP_MAX_EXPAND * 24 + 64], *w = chain;
    for (unsigned i = 0; i < LW_WGSL_PP_MAX_EXPAND + 2; i++) w += sprintf(w, "#define M%u M%u\n", i, i + 1);
    sprintf(w, "M0\n");
    lw__wgsl_file h = {"chain.wgsl", chain};
    p = (lw__wgsl_pp_params){&h, 1, NULL, 0, 0, 0};
    st = lw__wgsl_pp(NULL, "chain.wgsl", &p, &out, &len, g_err);
    CHECK_MSG(st == LW_ERR_TOO_LARGE && strstr(g_err, "macro expansion deeper"), "%s", g_err);
    /* a file that includes itself twice per level stops at the depth limit, not after 2^depth copies */
    lw__wgsl_file self = {"self.wgsl", "s\n#include \"self.wgsl\"\n#include \"self.wgsl\"\n"};
    p = (lw__wgsl_pp_params){&self, 1, NULL, 0, 0, 0};
    st = lw__wgsl_pp(NULL, "self.wgsl", &p, &out, &len, g_err);
    CHECK(st == LW_ERR_TOO_LARGE);
}

/* An allocator that fails the Nth call, to check that every failure path is clean (ASAN finds leaks). */
typedef struct failing {
    int countdown; /* calls left before failing; < 0: never fail */
    int calls;     /* calls made                                 */
} failing;
static void *f_malloc(void *u, size_t n) {
    failing *f = u;
    f->calls++;
    if (f->countdown >= 0 && f->countdown-- == 0) return NULL;
    return malloc(n);
}
static void *f_realloc(void *u, void *p, size_t n) {
    failing *f = u;
    f->calls++;
    if (f->countdown >= 0 && f->countdown-- == 0) return NULL;
    return realloc(p, n);
}
static void f_free(void *u, void *p) {
    (void)u;
    free(p);
}

static void test_alloc_failures(void) {
    lw__wgsl_file files[] = {
        {"m.wgsl", "#pragma once\n#define A 1\n#include \"i.wgsl\"\n#if A + B == 3\nA B\n#endif\n"},
        {"i.wgsl", "#pragma once\n#define B 2\ninc\n"}};
    lw__wgsl_define d[] = {{"X", "1"}, {"Y", "2"}};
    lw__wgsl_pp_params p = {files, 2, d, 2, 0, 0};
    failing f = {-1, 0};
    lw_allocator a = {f_malloc, f_realloc, f_free, &f};
    char *out = NULL;
    CHECK(lw__wgsl_pp(&a, "m.wgsl", &p, &out, NULL, g_err) == LW_OK);
    CHECK(out && strcmp(out, "inc\n1 2\n") == 0);
    free(out);
    int total = f.calls, failed_ok = 0;
    CHECK(total > 5);
    for (int i = 0; i < total; i++) {
        f = (failing){i, 0};
        out = NULL;
        lw_status st = lw__wgsl_pp(&a, "m.wgsl", &p, &out, NULL, g_err);
        failed_ok += st == LW_ERR_NOMEM && out == NULL;
        free(out);
    }
    CHECK_MSG(failed_ok == total, "%d of %d failing allocations reported NOMEM", failed_ok, total);
}

/* True when no line of text starts with '#' (every directive was consumed). */
static int no_directive_left(const char *text) {
    for (const char *p = text; *p;) {
        while (*p == ' ' || *p == '\t') p++;
        if (*p == '#') return 0;
        p = strchr(p, '\n');
        if (!p) break;
        p++;
    }
    return 1;
}

/* Every embedded shader expands for each variant its kernels use, and the table is sane. */
static void test_builtin(void) {
    size_t n = 0;
    const lw__wgsl_file *files = lw__wgsl_builtin(&n);
    CHECK(files != NULL && n >= 5);
    int found_matvec = 0;
    for (size_t i = 0; i < n; i++) {
        CHECK(files[i].name && files[i].text && strlen(files[i].text) > 0);
        for (size_t j = 0; j < i; j++) CHECK(strcmp(files[i].name, files[j].name) != 0);
        found_matvec += strcmp(files[i].name, "matvec.wgsl") == 0;
    }
    CHECK(found_matvec == 1);
    const char *types[] = {"TYPE_F32", "TYPE_F16", "TYPE_Q8_0", "TYPE_Q4_0"};
    for (int t = 0; t < 4; t++)
        for (int f16 = 0; f16 < 2; f16++)
            for (int sg = 0; sg < 2; sg++) {
                char f16s[2] = {(char)('0' + f16), 0}, sgs[2] = {(char)('0' + sg), 0};
                lw__wgsl_define d[] = {
                    {"WEIGHT_TYPE", types[t]}, {"F16", f16s}, {"SUBGROUPS", sgs}, {"WG_SIZE", "64"}};
                lw__wgsl_pp_params p = {files, n, d, 4, 0, 0};
                char *out = NULL;
                lw_status st = lw__wgsl_pp(NULL, "matvec.wgsl", &p, &out, NULL, g_err);
                CHECK_MSG(st == LW_OK, "matvec %s f16=%d sg=%d: %s", types[t], f16, sg, g_err);
                if (out) {
                    CHECK(strstr(out, "@compute") != NULL);
                    CHECK((strstr(out, "enable f16;") != NULL) == (f16 == 1));
                    CHECK((strstr(out, "enable subgroups;") != NULL) == (sg == 1));
                    CHECK(no_directive_left(out));
                }
                free(out);
            }
    /* a weight type without a routine (15: Q8_K, an activation format) fails with the template's #error */
    lw__wgsl_define d[] = {{"WEIGHT_TYPE", "15"}, {"F16", "0"}, {"SUBGROUPS", "0"}};
    lw__wgsl_pp_params p = {files, n, d, 3, 0, 0};
    char *out = NULL;
    CHECK(lw__wgsl_pp(NULL, "matvec.wgsl", &p, &out, NULL, g_err) == LW_ERR_UNSUPPORTED);
}

int main(void) {
    test_plain_and_macros();
    test_conditionals();
    test_expressions();
    test_includes();
    test_errors();
    test_limits();
    test_alloc_failures();
    test_builtin();
    return test_summary("test-wgsl-pp");
}
