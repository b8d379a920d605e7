/* Tool calls: parsing replies in the Hermes/Qwen, Llama 3 and Mistral conventions (calls, content, malformed
 * calls left as text), OpenAI's tool_calls JSON (read back by the JSON reader), the grammar built from
 * OpenAI tool definitions (valid calls accepted whole, invalid ones refused, for each format, a named
 * function, no parallel calls, tools without parameters, $ref inside parameters), its errors, the format
 * found in chat templates; then constrained generation through stories260K (../shared, skipped visibly when
 * absent): every finished reply parses into calls of the defined tools whose arguments python's jsonschema
 * validates against their schemas (with a self-check that must fail), and the CLI's --tools output; `llamaweb
 * chat --tools` on a synthetic model (no shared data) whose template refuses to render without the tools or
 * shows a tool message's text: calls printed per reply, `/tool TEXT` a "tool" message. */
#include "core/core.h"
#include "grammar/grammar.h"
#include "structured-test.h"
#include "test.h"

#include <stdlib.h>
#include <string.h>

static const char tools[] =
    "[{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"description\": \"Weather for a "
    "city\","
    " \"parameters\": {\"type\": \"object\", \"properties\": {\"city\": {\"type\": \"string\", "
    "\"maxLength\": 12},"
    " \"unit\": {\"enum\": [\"c\", \"f\"]}}, \"required\": [\"city\"]}}},"
    " {\"type\": \"function\", \"function\": {\"name\": \"add\", \"parameters\": {\"type\": \"object\","
    " \"properties\": {\"a\": {\"$ref\": \"#/$defs/n\"}, \"b\": {\"$ref\": \"#/$defs/n\"}}, \"required\": "
    "[\"a\", \"b\"],"
    " \"$defs\": {\"n\": {\"type\": \"integer\"}}}}},"
    " {\"name\": \"ping\"}]";

/* The C library's allocator, for the internal JSON reader (which takes a resolved one). */
static lw_allocator libc;

/* ---------------------------------------------------------------------------------------------------------
 * Parsing
 * ------------------------------------------------------------------------------------------------------- */

typedef struct parse_case {
    lw_tool_format format;
    const char *text;
    int n;               /* calls expected                                  */
    const char *names;   /* their names, space-separated                    */
    const char *args0;   /* the first call's arguments (NULL: not checked)  */
    const char *content; /* content expected (NULL: the whole text, trimmed) */
} parse_case;

static const parse_case cases[] = {
    {LW_TOOL_FORMAT_HERMES,
     "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>", 1,
     "get_weather", "{\"city\": \"Paris\"}", ""},
    {LW_TOOL_FORMAT_HERMES,
     "Let me check.\n<tool_call>\n{\"name\": \"a\", \"arguments\": {\"x\": [1, {\"y\": "
     "null}]}}\n</tool_call>\n"
     "<tool_call>\n{\"arguments\": {}, \"name\": \"b\"}\n</tool_call>\n",
     2, "a b", "{\"x\": [1, {\"y\": null}]}", "Let me check."},
    {LW_TOOL_FORMAT_HERMES, "<tool_call>{\"name\": \"f\", \"arguments\": \"{\\\"x\\\": 1}\"}</tool_call>", 1,
     "f", "{\"x\": 1}", ""},
    {LW_TOOL_FORMAT_HERMES, "<tool_call>{\"name\": \"f\", \"arguments\": {\"x\": }</tool_call> after", 0, "",
     NULL, NULL},
    {LW_TOOL_FORMAT_HERMES, "<tool_call>\n{\"name\":\"f\",\"arguments\":{}}", 1, "f", "{}", ""},
    {LW_TOOL_FORMAT_HERMES,
     "<tool_call>{\"name\": \"f\", \"arguments\": {\"s\": \"</tool_call>\"}}</tool_call>", 1, "f",
     "{\"s\": \"</tool_call>\"}", ""},
    {LW_TOOL_FORMAT_HERMES, "<tool_call>{\"arguments\": {}}</tool_call>", 0, "", NULL, NULL},
    {LW_TOOL_FORMAT_HERMES, "<tool_call>{\"name\": \"f\", \"arguments\": {}} junk</tool_call>", 0, "", NULL,
     NULL},
    {LW_TOOL_FORMAT_HERMES, "<tool_call>{\"name\": \"f\", \"arguments\": 3}</tool_call>", 0, "", NULL, NULL},
    {LW_TOOL_FORMAT_HERMES, "<tool_call>{\"name\": \"\\u0066\"}</tool_call> ok", 1, "f", "{}", "ok"},
    {LW_TOOL_FORMAT_HERMES, "no calls here", 0, "", NULL, NULL},
    {LW_TOOL_FORMAT_HERMES, "", 0, "", NULL, ""},
    {LW_TOOL_FORMAT_LLAMA3, "{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Paris\"}}", 1,
     "get_weather", "{\"city\": \"Paris\"}", ""},
    {LW_TOOL_FORMAT_LLAMA3, "<|python_tag|>{\"name\": \"f\", \"parameters\": {}}", 1, "f", "{}", ""},
    {LW_TOOL_FORMAT_LLAMA3, " {\"type\": \"function\", \"name\": \"f\", \"parameters\": {\"a\": [1, 2]}}\n",
     1, "f", "{\"a\": [1, 2]}", ""},
    {LW_TOOL_FORMAT_LLAMA3, "The weather is nice.", 0, "", NULL, NULL},
    {LW_TOOL_FORMAT_LLAMA3, "{\"answer\": 42}", 0, "", NULL, NULL},
    {LW_TOOL_FORMAT_LLAMA3,
     "{\"name\": \"f\", \"parameters\": {}}; {\"name\": \"g\", \"parameters\": {\"z\": 1}}", 2, "f g", "{}",
     ""},
    {LW_TOOL_FORMAT_MISTRAL,
     "[TOOL_CALLS][{\"name\": \"f\", \"arguments\": {\"x\": 1}}, {\"name\": \"g\", \"arguments\": {}}]", 2,
     "f g", "{\"x\": 1}", ""},
    {LW_TOOL_FORMAT_MISTRAL, "[{\"name\": \"f\", \"arguments\": {}}]", 1, "f", "{}", ""},
    {LW_TOOL_FORMAT_MISTRAL, "[TOOL_CALLS][{\"name\": \"f\"}, 3]", 0, "", NULL, NULL},
    {LW_TOOL_FORMAT_MISTRAL, "Sure. [TOOL_CALLS][{\"name\": \"f\", \"arguments\": {}}] Done.", 1, "f", "{}",
     "Sure.  Done."},
    {LW_TOOL_FORMAT_AUTO,
     "<tool_call>\n{\"name\": \"a\", \"arguments\": {}}\n</tool_call>\n<tool_call>\n{\"name\": \"b\", "
     "\"arguments\": {}}\n"
     "</tool_call>",
     2, "a b", "{}", ""},
    {LW_TOOL_FORMAT_AUTO, "{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Oslo\"}}", 1,
     "get_weather", "{\"city\": \"Oslo\"}", ""},
    {LW_TOOL_FORMAT_AUTO, "[TOOL_CALLS][{\"name\": \"f\", \"arguments\": {\"x\": 1}}]", 1, "f", "{\"x\": 1}",
     ""},
    {LW_TOOL_FORMAT_AUTO, "Just text, {not json}.", 0, "", NULL, NULL},
};

/* The whole text with spaces trimmed at both ends. */
static void trimmed(const char *s, char *out, size_t cap) {
    size_t b = 0, e = strlen(s);
    while (b < e && strchr(" \t\r\n", s[b])) b++;
    while (e > b && strchr(" \t\r\n", s[e - 1])) e--;
    if (e - b >= cap) e = b + cap - 1;
    memcpy(out, s + b, e - b);
    out[e - b] = 0;
}

/* Checks lw_tool_calls_json against the calls by reading it back. */
static void check_json(const lw_tool_calls *tc, const char *what) {
    size_t len = 0;
    const char *js = lw_tool_calls_json(tc, &len);
    CHECK(js != NULL && len == strlen(js));
    if (!js) return;
    lw__json j;
    char err[LW_ERRMSG_SIZE];
    CHECK_MSG(lw__json_parse(js, len, 0, &libc, &j, err) == LW_OK,
              "%s: tool_calls JSON does not parse: %s: %s", what, err, js);
    if (j.n == NULL) return;
    size_t i = 0;
    CHECK(j.n[j.root].type == LW_JSON_ARR);
    for (uint32_t k = j.n[j.root].first; k != LW_JSON_NONE; k = j.n[k].next, i++) {
        const lw_tool_call *c = lw_tool_calls_get(tc, i);
        uint32_t id = lw__json_member(&j, k, "id"), type = lw__json_member(&j, k, "type"),
                 fn = lw__json_member(&j, k, "function");
        uint32_t name = lw__json_member(&j, fn, "name"), args = lw__json_member(&j, fn, "arguments");
        char want_id[32];
        snprintf(want_id, sizeof want_id, "call_%zu", i);
        CHECK_MSG(c && id != LW_JSON_NONE && j.n[id].slen == strlen(want_id) &&
                      !memcmp(j.strs + j.n[id].str, want_id, strlen(want_id)),
                  "%s: call %zu id", what, i);
        CHECK(type != LW_JSON_NONE && j.n[type].slen == 8 && !memcmp(j.strs + j.n[type].str, "function", 8));
        CHECK_MSG(c && name != LW_JSON_NONE && j.n[name].slen == strlen(c->name) &&
                      !memcmp(j.strs + j.n[name].str, c->name, strlen(c->name)),
                  "%s: call %zu name", what, i);
        /* OpenAI's arguments: a string holding the JSON text */
        CHECK_MSG(c && args != LW_JSON_NONE && j.n[args].type == LW_JSON_STR &&
                      j.n[args].slen == strlen(c->arguments) &&
                      !memcmp(j.strs + j.n[args].str, c->arguments, strlen(c->arguments)),
                  "%s: call %zu arguments", what, i);
    }
    CHECK_MSG(i == lw_tool_calls_count(tc), "%s: %zu objects for %zu calls", what, i,
              lw_tool_calls_count(tc));
    lw__json_free(&libc, &j);
}

static void test_parse(void) {
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        const parse_case *pc = &cases[k];
        lw_tool_calls *tc = NULL;
        CHECK_MSG(lw_tool_calls_parse(pc->text, strlen(pc->text), pc->format, NULL, &tc) == LW_OK,
                  "case %zu: %s", k, lw_tool_calls_error(tc));
        CHECK_MSG((int)lw_tool_calls_count(tc) == pc->n, "case %zu: %zu calls, want %d: %s", k,
                  lw_tool_calls_count(tc), pc->n, pc->text);
        char names[256] = "";
        for (size_t i = 0; i < lw_tool_calls_count(tc); i++) {
            if (i) strcat(names, " ");
            strncat(names, lw_tool_calls_get(tc, i)->name, 64);
        }
        CHECK_MSG(!strcmp(names, pc->names), "case %zu: names '%s', want '%s'", k, names, pc->names);
        if (pc->args0 && lw_tool_calls_count(tc))
            CHECK_MSG(!strcmp(lw_tool_calls_get(tc, 0)->arguments, pc->args0),
                      "case %zu: arguments '%s', want '%s'", k, lw_tool_calls_get(tc, 0)->arguments,
                      pc->args0);
        char want[512];
        if (pc->content)
            snprintf(want, sizeof want, "%s", pc->content);
        else
            trimmed(pc->text, want, sizeof want);
        size_t cl = 0;
        const char *content = lw_tool_calls_content(tc, &cl);
        CHECK_MSG(!strcmp(content, want) && cl == strlen(want), "case %zu: content '%s', want '%s'", k,
                  content, want);
        CHECK(lw_tool_calls_get(tc, lw_tool_calls_count(tc)) == NULL);
        check_json(tc, pc->text);
        lw_tool_calls_free(tc);
    }
    /* the JSON string escapes of arguments that hold quotes, backslashes, newlines, control bytes, UTF-8 */
    const char *odd = "<tool_call>{\"name\": \"f\", \"arguments\": {\"s\": "
                      "\"a\\\"b\\\\c\\nd\\u0001\xc3\xa9\"}}</tool_call>";
    lw_tool_calls *tc = NULL;
    CHECK(lw_tool_calls_parse(odd, strlen(odd), LW_TOOL_FORMAT_HERMES, NULL, &tc) == LW_OK &&
          lw_tool_calls_count(tc) == 1);
    check_json(tc, "escapes");
    lw_tool_calls_free(tc);
    /* refusals */
    CHECK(lw_tool_calls_parse(NULL, 3, LW_TOOL_FORMAT_HERMES, NULL, &tc) == LW_ERR_INVALID_ARG &&
          strlen(lw_tool_calls_error(tc)) > 0);
    lw_tool_calls_free(tc);
    CHECK(lw_tool_calls_parse("x", 1, (lw_tool_format)17, NULL, &tc) == LW_ERR_INVALID_ARG);
    lw_tool_calls_free(tc);
    CHECK(lw_tool_calls_parse("x", 1, LW_TOOL_FORMAT_HERMES, NULL, NULL) == LW_ERR_INVALID_ARG);
    /* length, not NUL: a call cut by len is not a call */
    const char *full = "<tool_call>{\"name\": \"f\", \"arguments\": {}}</tool_call>";
    CHECK(lw_tool_calls_parse(full, 30, LW_TOOL_FORMAT_HERMES, NULL, &tc) == LW_OK &&
          lw_tool_calls_count(tc) == 0);
    lw_tool_calls_free(tc);

    /* formats in templates */
    CHECK(lw_tool_format_detect("{% for t in tools %}<tool_call>{{ t }}</tool_call>{% endfor %}") ==
          LW_TOOL_FORMAT_HERMES);
    CHECK(lw_tool_format_detect("{{ '[TOOL_CALLS]' }}") == LW_TOOL_FORMAT_MISTRAL);
    CHECK(lw_tool_format_detect("<|start_header_id|>ipython<|end_header_id|>") == LW_TOOL_FORMAT_LLAMA3);
    CHECK(lw_tool_format_detect("{{ messages }}") == LW_TOOL_FORMAT_AUTO);
    CHECK(lw_tool_format_detect(NULL) == LW_TOOL_FORMAT_AUTO);
}

/* ---------------------------------------------------------------------------------------------------------
 * Grammar
 * ------------------------------------------------------------------------------------------------------- */

/* Whether text is a whole sentence of the tools grammar (no vocabulary). */
static int accepts(lw_tool_format f, const char *only, int parallel, const char *text) {
    lw_grammar *g = NULL;
    lw_status st = lw_grammar_from_tools(tools, strlen(tools), f, only, parallel, NULL, NULL, &g);
    CHECK_MSG(st == LW_OK, "tools grammar: %s", lw_grammar_error(g));
    int ok =
        st == LW_OK && lw_grammar_accept_text(g, text, strlen(text)) == LW_OK && lw_grammar_is_complete(g);
    lw_grammar_free(g);
    return ok;
}

/* A grammar sentence must parse back into the calls it holds (names in order). */
static void round_trip(lw_tool_format f, const char *text, const char *names) {
    lw_tool_calls *tc = NULL;
    CHECK(lw_tool_calls_parse(text, strlen(text), f, NULL, &tc) == LW_OK);
    char got[256] = "";
    for (size_t i = 0; i < lw_tool_calls_count(tc); i++) {
        if (i) strcat(got, " ");
        strncat(got, lw_tool_calls_get(tc, i)->name, 64);
    }
    CHECK_MSG(!strcmp(got, names) && !strcmp(lw_tool_calls_content(tc, NULL), ""), "round trip of %s: '%s'",
              text, got);
    lw_tool_calls_free(tc);
}

static void test_grammar(void) {
    const lw_tool_format H = LW_TOOL_FORMAT_HERMES, L = LW_TOOL_FORMAT_LLAMA3, M = LW_TOOL_FORMAT_MISTRAL;
    const char *w1 =
        "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>";
    const char *w2 =
        "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\", \"unit\": \"c\"}}\n"
        "</tool_call>\n<tool_call>\n{\"name\": \"add\", \"arguments\": {\"a\": 1, \"b\": -2}}\n</tool_call>";
    const char *w3 = "<tool_call>\n{\"name\": \"ping\", \"arguments\": {}}\n</tool_call>";
    CHECK(accepts(H, NULL, 1, w1) && accepts(H, NULL, 1, w2) && accepts(H, NULL, 1, w3));
    round_trip(H, w2, "get_weather add");
    CHECK(accepts(H, NULL, 0, w1) && !accepts(H, NULL, 0, w2)); /* one call */
    CHECK(accepts(LW_TOOL_FORMAT_AUTO, NULL, 1, w1));           /* a grammar for AUTO is Hermes' */
    static const char
        *const
            bad_h
                [] =
                    {
                        "<tool_call>\n{\"name\": \"get_time\", \"arguments\": {\"city\": "
                        "\"Paris\"}}\n</tool_call>", /* no
                                                        such
                                                        tool
                                                      */
                        "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"unit\": "
                        "\"c\"}}\n</tool_call>", /* city
                                                    required
                                                  */
                        "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", "
                        "\"unit\": "
                        "\"k\"}}\n</tool_call>",
                        "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"a very long "
                        "city "
                        "name\"}}\n</tool_call>",
                        "<tool_call>\n{\"name\": \"add\", \"arguments\": {\"a\": \"1\", \"b\": "
                        "2}}\n</tool_call>", /* $ref:
                                                integer
                                              */
                        "<tool_call>\n{\"name\": \"add\", \"arguments\": {\"a\": 1.5, \"b\": "
                        "2}}\n</tool_call>",
                        "<tool_call>\n{\"name\": \"ping\", \"arguments\": {\"x\": 1}}\n</tool_call>", /* no
                                                                                                         parameters:
                                                                                                         {}
                                                                                                         only
                                                                                                       */
                        "Sure! <tool_call>\n{\"name\": \"ping\", \"arguments\": {}}\n</tool_call>", /* nothing
                                                                                                       but
                                                                                                       calls
                                                                                                     */
                        "<tool_call>\n{\"arguments\": {}, \"name\": \"ping\"}\n</tool_call>", /* the name
                                                                                                 comes first
                                                                                               */
                        "{\"name\": \"ping\", \"arguments\": {}}",
                    };
    for (size_t i = 0; i < sizeof bad_h / sizeof bad_h[0]; i++)
        CHECK_MSG(!accepts(H, NULL, 1, bad_h[i]), "hermes grammar accepts %s", bad_h[i]);
    /* a named function only */
    CHECK(accepts(H, "add", 1,
                  "<tool_call>\n{\"name\": \"add\", \"arguments\": {\"a\": 1, \"b\": 2}}\n</tool_call>"));
    CHECK(!accepts(H, "add", 1, w1));
    /* Llama 3: one object with "parameters" */
    const char *l1 = "{\"name\": \"add\", \"parameters\": {\"a\": 10, \"b\": 20}}";
    CHECK(accepts(L, NULL, 1, l1) &&
          !accepts(L, NULL, 1, "{\"name\": \"add\", \"arguments\": {\"a\": 10, \"b\": 20}}"));
    CHECK(!accepts(L, NULL, 1,
                   "{\"name\": \"add\", \"parameters\": {\"a\": 10, \"b\": 20}}; {\"name\": \"ping\", "
                   "\"parameters\": {}}"));
    round_trip(L, l1, "add");
    /* Mistral: an array of calls */
    const char *m2 = "[{\"name\": \"add\", \"arguments\": {\"a\": 1, \"b\": 2}}, {\"name\": \"get_weather\", "
                     "\"arguments\": {\"city\": \"x\"}}]";
    CHECK(accepts(M, NULL, 1, m2) && !accepts(M, NULL, 0, m2));
    CHECK(accepts(M, NULL, 0, "[{\"name\": \"ping\", \"arguments\": {}}]"));
    round_trip(M, m2, "add get_weather");

    /* the text itself, and its failures */
    char *text = NULL, err[256];
    size_t n = 0;
    CHECK(lw_tool_grammar_gbnf(tools, strlen(tools), H, NULL, 1, NULL, &text, &n, err, sizeof err) == LW_OK &&
          text && n == strlen(text));
    CHECK(text && strstr(text, "t1-call ::= ") && strstr(text, "t2-root ::= ") &&
          !strstr(text, "\nroot ::= r"));
    if (text && getenv("LW_TOOLS_VERBOSE")) printf("%s", text);
    /* the primitives once: every tool's grammar has "space", the whole has one rule for it */
    int n_space = 0;
    for (const char *q = text; q && (q = strstr(q, "\nspace ::=")); q++) n_space++;
    CHECK_MSG(n_space == 1, "%d rules for space", n_space);
    lw_grammar_text_free(NULL, text);
    static const struct {
        const char *tools, *only;
        lw_status st;
        const char *msg;
    } bad[] = {
        {"{\"name\": \"f\"}", NULL, LW_ERR_INVALID_ARG, "array"},
        {"[]", NULL, LW_ERR_INVALID_ARG, "empty"},
        {"[{\"name\": \"has space\"}]", NULL, LW_ERR_INVALID_ARG, "name"},
        {"[{\"parameters\": {}}]", NULL, LW_ERR_INVALID_ARG, "name"},
        {"[{\"name\": \"f\"}]", "g", LW_ERR_NOT_FOUND, "'g'"},
        {"[{\"name\": \"f\", \"parameters\": {\"type\": \"string\", \"pattern\": \"^a\"}}]", NULL,
         LW_ERR_UNSUPPORTED, "(f)"},
        {"[{\"name\": \"f\"", NULL, LW_ERR_BAD_STRING, "json: expected ',' or '}' at byte 13"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        lw_status st = lw_tool_grammar_gbnf(bad[i].tools, strlen(bad[i].tools), H, bad[i].only, 1, NULL,
                                            &text, &n, err, sizeof err);
        CHECK_MSG(st == bad[i].st && !text && strstr(err, bad[i].msg), "bad tools %zu: %s -> %d '%s'", i,
                  bad[i].tools, (int)st, err);
        lw_grammar *g = NULL;
        CHECK(lw_grammar_from_tools(bad[i].tools, strlen(bad[i].tools), H, bad[i].only, 1, NULL, NULL, &g) ==
                  bad[i].st &&
              g && strstr(lw_grammar_error(g), bad[i].msg));
        lw_grammar_free(g);
    }
}

/* ---------------------------------------------------------------------------------------------------------
 * Through a model
 * ------------------------------------------------------------------------------------------------------- */

/* The parameters schema of tool name in the tools array, as JSON text (static buffer; "{...}" for ping). */
static const char *schema_of(const char *name) {
    static char out[1024];
    lw__json j;
    char err[LW_ERRMSG_SIZE];
    snprintf(out, sizeof out, "{\"type\": \"object\", \"additionalProperties\": false}");
    if (lw__json_parse(tools, strlen(tools), 0, &libc, &j, err) != LW_OK) return out;
    for (uint32_t k = j.n[j.root].first; k != LW_JSON_NONE; k = j.n[k].next) {
        uint32_t fn = lw__json_member(&j, k, "function");
        if (fn == LW_JSON_NONE) fn = k;
        uint32_t nm = lw__json_member(&j, fn, "name"), p = lw__json_member(&j, fn, "parameters");
        if (nm != LW_JSON_NONE && j.n[nm].slen == strlen(name) &&
            !memcmp(j.strs + j.n[nm].str, name, strlen(name)) && p != LW_JSON_NONE &&
            j.n[p].src_len < sizeof out)
            snprintf(out, sizeof out, "%.*s", (int)j.n[p].src_len, tools + j.n[p].src);
    }
    lw__json_free(&libc, &j);
    return out;
}

/* One line for the validator: {"schema": ..., "outputs": ["args"]}. */
static void log_args(FILE *f, const char *schema, const char *args) {
    fprintf(f, "{\"schema\": %s, \"outputs\": [", schema);
    put_json_string(f, args);
    fprintf(f, "]}\n");
}

static void test_model(const char *model_path) {
    lw_model *m = NULL;
    if (lw_model_load_file(model_path, NULL, &m) != LW_OK) {
        CHECK_MSG(0, "load: %s", lw_model_error(m));
        lw_model_free(m);
        return;
    }
    char log_path[1024];
    snprintf(log_path, sizeof log_path, "mkdir -p '%s'", test_tmp_dir());
    if (system(log_path) != 0) printf("note: cannot make %s\n", test_tmp_dir());
    snprintf(log_path, sizeof log_path, "%s/tool-call-args.jsonl", test_tmp_dir());
    FILE *log = fopen(log_path, "w");
    CHECK(log != NULL);
    if (log)
        log_args(log, "{\"type\": \"object\", \"required\": [\"city\"]}", "{\"town\": 1}"); /* must fail */
    lw_context *c = NULL;
    lw_sampler *s = NULL;
    CHECK(gen_setup(m, 512, 1.0f, &c, &s) == 0);
    const char *e = getenv("LW_TOOL_RUNS");
    const int n_runs = e && atoi(e) > 0 ? atoi(e) : 12;
    int logged = 0;
    /* one call per reply ends when the model samples its end token (the only one allowed then); with parallel
     * calls a tiny model rather opens the next call than ends, so those runs are cut by length: the calls
     * complete by then must parse and validate, the open one stays content */
    static const struct {
        lw_tool_format f;
        const char *only;
        int parallel;
        const char *name;
    } runs[] = {
        {LW_TOOL_FORMAT_HERMES, NULL, 0, "hermes"},
        {LW_TOOL_FORMAT_LLAMA3, NULL, 0, "llama3"},
        {LW_TOOL_FORMAT_MISTRAL, NULL, 0, "mistral"},
        {LW_TOOL_FORMAT_HERMES, "add", 0, "hermes, add only"},
        {LW_TOOL_FORMAT_HERMES, NULL, 1, "hermes, parallel"}}; /* (a cut Mistral array holds no calls) */
    for (size_t k = 0; k < sizeof runs / sizeof runs[0] && c && s && log; k++) {
        lw_grammar *g = NULL;
        CHECK_MSG(lw_grammar_from_tools(tools, strlen(tools), runs[k].f, runs[k].only, runs[k].parallel,
                                        lw_model_vocab(m), NULL, &g) == LW_OK,
                  "%s", lw_grammar_error(g));
        CHECK(lw_sampler_set_grammar(s, g) == LW_OK);
        int finished = 0, calls = 0, with_calls = 0;
        for (int i = 0; i < n_runs; i++) {
            lw_context_set_n_past(c, 0);
            lw_sampler_reset(s, 77 + (uint64_t)i);
            text_buf b = {{0}, 0};
            lw_generate_params gp = lw_generate_default_params();
            gp.n_predict = runs[k].parallel ? 160 : 320;
            gp.on_token = text_buf_on_token;
            gp.user = &b;
            lw_generate_result r;
            lw_status st = lw_generate_text(c, s, "Once upon a time", 16, 1, 0, &gp, &r);
            CHECK_MSG(st == LW_OK, "%s run %d: %s / %s", runs[k].name, i, lw_context_error(c),
                      lw_grammar_error(g));
            const int done = r.stop == LW_STOP_EOG;
            if (!done && !runs[k].parallel) continue; /* cut by n_predict */
            finished += done;
            lw_tool_calls *tc = NULL;
            CHECK(lw_tool_calls_parse(b.s, b.n, runs[k].f, NULL, &tc) == LW_OK);
            const size_t nc = lw_tool_calls_count(tc);
            if (done)
                CHECK_MSG(nc >= 1 && !strcmp(lw_tool_calls_content(tc, NULL), ""),
                          "%s run %d: %zu calls, content '%s' in %s", runs[k].name, i, nc,
                          lw_tool_calls_content(tc, NULL), b.s);
            with_calls += nc >= 1;
            for (size_t q = 0; q < nc; q++) {
                const lw_tool_call *call = lw_tool_calls_get(tc, q);
                const int known = !strcmp(call->name, "get_weather") || !strcmp(call->name, "add") ||
                                  !strcmp(call->name, "ping");
                CHECK_MSG(known && (!runs[k].only || !strcmp(call->name, runs[k].only)),
                          "%s run %d: call of '%s'", runs[k].name, i, call->name);
                log_args(log, schema_of(call->name), call->arguments);
                logged++;
                calls++;
            }
            if (i == 0) printf("%s: %s\n  -> %s\n", runs[k].name, b.s, lw_tool_calls_json(tc, NULL));
            lw_tool_calls_free(tc);
        }
        printf("%s: %d runs, %d ended by the model, %d with calls, %d calls (all parsed and logged for "
               "jsonschema)\n",
               runs[k].name, n_runs, finished, with_calls, calls);
        CHECK_MSG((runs[k].parallel ? with_calls : finished) >= n_runs / 2,
                  "%s: only %d of %d runs finished (%d with calls)", runs[k].name, finished, n_runs,
                  with_calls);
        lw_sampler_set_grammar(s, NULL);
        lw_grammar_free(g);
    }
    if (log) {
        fclose(log);
        int bad = jsonschema_validate_log(log_path);
        if (bad < 0)
            printf("note: python3 jsonschema not installed: arguments checked by the grammar only\n");
        else
            printf("jsonschema: %d arguments validated, %d invalid (1 expected: the self-check)\n", logged,
                   bad);
        CHECK_MSG(bad < 0 || bad == 1, "%d arguments fail jsonschema validation (or the self-check passed)",
                  bad - 1);
    }
    lw_sampler_free(s);
    lw_context_free(c);
    lw_model_free(m);
}

/* llamaweb run --tools: the reply is calls, printed as OpenAI tool_calls. */
static void test_cli(const char *model_path) {
    const char *cli = getenv("LW_CLI");
    if (!cli || !*cli) {
        printf("SKIP (CLI check): LW_CLI not set\n");
        return;
    }
    char tools_path[1024], cmd[3072];
    snprintf(tools_path, sizeof tools_path, "%s/tool-call-tools.json", test_tmp_dir());
    FILE *f = fopen(tools_path, "w");
    CHECK(f != NULL);
    if (!f) return;
    fputs(tools, f);
    fclose(f);
    static char buf[1 << 16];
    for (int k = 0; k < 2; k++) {
        snprintf(cmd, sizeof cmd,
                 "'%s' run -m '%s' -p 'Once upon a time' -n 320 --seed %d --temp 1 --tools '%s' "
                 "--tool-choice %s 2>/dev/null",
                 cli, model_path, 5 + k, tools_path, k ? "add" : "required");
        FILE *p = popen(cmd, "r");
        size_t n = p ? fread(buf, 1, sizeof buf - 1, p) : 0;
        buf[n] = 0;
        CHECK_MSG(p && pclose(p) == 0, "%s failed", cmd);
        const char *tc = strstr(buf, "\ntool_calls: [");
        CHECK_MSG(tc && (strstr(tc, "\"name\": \"add\"") || (!k && strstr(tc, "\"function\""))),
                  "CLI --tool-choice %s: %s", k ? "add" : "required", buf);
        if (k && tc) CHECK(!strstr(tc, "get_weather") && !strstr(tc, "\"ping\""));
    }
    snprintf(cmd, sizeof cmd, "'%s' run -m '%s' -p x -n 4 --tool-choice required >/dev/null 2>&1", cli,
             model_path);
    CHECK(system(cmd) != 0); /* --tool-choice needs --tools */
    snprintf(cmd, sizeof cmd, "'%s' run -m '%s' -p x -n 4 --tools '%s' --tool-choice nosuch >/dev/null 2>&1",
             cli, model_path, tools_path);
    CHECK(system(cmd) != 0);
}

/* Runs cmd (stderr into err_path) and captures its stdout into buf (cap bytes). Returns the exit status. */
static int run_cmd(const char *cmd, char *buf, size_t cap) {
    FILE *p = popen(cmd, "r");
    size_t n = p ? fread(buf, 1, cap - 1, p) : 0;
    buf[n] = 0;
    int st = p ? pclose(p) : -1;
    return st == -1 ? -1 : (st >> 8) & 0xff;
}

/* llamaweb chat --tools: the template gets the tools (it raises without them, and names the first), each
 * reply is parsed ("tool_calls: [...]" after it; a grammar makes them calls), `/tool TEXT` is a tool message
 * (the template raises with its text: the turn fails visibly and the conversation goes on). */
static void test_cli_chat(void) {
    const char *cli = getenv("LW_CLI");
    if (!cli || !*cli) {
        printf("SKIP (chat CLI check): LW_CLI not set\n");
        return;
    }
    static const char tmpl[] =
        "{% if not tools %}{{ raise_exception('no tools') }}{% endif %}"
        "{% if messages[-1].role == 'tool' %}{{ raise_exception('tool message: ' ~ messages[-1].content) "
        "}}{% endif %}"
        "<|im_start|>system\nTools: {{ tools[0].function.name }}<|im_end|>\n"
        "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
        "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}";
    /* one small call: a reply of bounded length from a random model */
    static const char unit_tool[] =
        "[{\"type\": \"function\", \"function\": {\"name\": \"get_unit\", \"parameters\": "
        "{\"type\": \"object\", \"properties\": {\"u\": {\"enum\": [\"c\", \"f\"]}}, "
        "\"required\": [\"u\"]}}}]";
    char dir[1024], t_path[1200], tools_path[1200], model[1200], err_path[1200], cmd[6000];
    snprintf(dir, sizeof dir, "%s", test_tmp_dir());
    snprintf(t_path, sizeof t_path, "%s/chat-tools.jinja", dir);
    snprintf(tools_path, sizeof tools_path, "%s/chat-tools.json", dir);
    snprintf(model, sizeof model, "%s/chat-tools.gguf", dir);
    snprintf(err_path, sizeof err_path, "%s/chat-tools.err", dir);
    FILE *f = fopen(t_path, "w"), *g = fopen(tools_path, "w");
    CHECK(f && g);
    if (f) fputs(tmpl, f), fclose(f);
    if (g) fputs(unit_tool, g), fclose(g);
    if (!f || !g) return;
    static char buf[1 << 16], err[1 << 14];
    snprintf(
        cmd, sizeof cmd,
        "'%s' synth --preset tiny --type f32 --vocab builtin --chat-template '%s' -o '%s' >/dev/null 2>&1",
        cli, t_path, model);
    CHECK_MSG(system(cmd) == 0, "%s failed", cmd);
    const char *chat = "'%s' chat -m '%s' -n 120 --temp 1 --seed 3 --ctx 1024 -t 1 %s 2>'%s'";
    /* without --tools the template refuses every turn */
    char opts[2048];
    snprintf(cmd, sizeof cmd, chat, cli, model, "", err_path);
    snprintf(cmd + strlen(cmd), sizeof cmd - strlen(cmd), " <<'EOF'\nWeather?\nEOF\n");
    CHECK(run_cmd(cmd, buf, sizeof buf) == 0);
    FILE *e = fopen(err_path, "r");
    size_t en = e ? fread(err, 1, sizeof err - 1, e) : 0;
    err[en] = 0;
    if (e) fclose(e);
    CHECK_MSG(strstr(err, "no tools") && !strstr(buf, "tool_calls:"), "without --tools: %s / %s", buf, err);
    /* with them: two replies that are calls of get_unit, and the tool message refused by the template */
    snprintf(opts, sizeof opts, "--tools '%s' --tool-choice required --no-parallel-tool-calls", tools_path);
    snprintf(cmd, sizeof cmd, chat, cli, model, opts, err_path);
    snprintf(cmd + strlen(cmd), sizeof cmd - strlen(cmd),
             " <<'EOF'\nWeather?\n/tool {\"temp\": 21}\nAnd now?\nEOF\n");
    CHECK(run_cmd(cmd, buf, sizeof buf) == 0);
    e = fopen(err_path, "r");
    en = e ? fread(err, 1, sizeof err - 1, e) : 0;
    err[en] = 0;
    if (e) fclose(e);
    int calls = 0;
    for (const char *q = buf; (q = strstr(q, "tool_calls: [{\"id\": \"call_0\", \"type\": \"function\", "
                                             "\"function\": {\"name\": \"get_unit\", \"arguments\": \"{"));
         q++)
        calls++;
    CHECK_MSG(calls == 2, "chat --tools: %d calls printed (want 2): %s", calls, buf);
    CHECK_MSG(strstr(err, "tool message: {\"temp\": 21}") && !strstr(err, "no tools"), "chat /tool: %s", err);
    printf("chat --tools: %d replies with calls; the tool message reached the template\n", calls);
}

int main(void) {
    libc = lw__allocator_or_default(NULL);
    test_parse();
    test_grammar();
    test_cli_chat();
    char path[1024];
    snprintf(path, sizeof path, "%s/models/stories260K.gguf", test_shared_dir());
    FILE *f = fopen(path, "rb");
    if (!f) {
        printf("SKIP (generation and CLI checks): no %s\n", path);
    } else {
        fclose(f);
        test_model(path);
        test_cli(path);
    }
    return test_summary("test-tool-calls");
}
