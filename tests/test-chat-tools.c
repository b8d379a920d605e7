/* Chat templates given `tools` and OpenAI-shaped messages as JSON (lw_chat_params.tools,
 * lw_chat_template_render_json): the real Qwen2.5, Qwen3, Llama 3.1 and Mistral Nemo templates render a
 * request with two tools, and a conversation with an assistant tool call and its tool result, exactly as
 * @huggingface/jinja renders them (tests/test-chat-tools-expected.h), also with the tool-calling turn's content
 * null as OpenAI clients send it; without tools the same templates give
 * the same text as lw_chat_template_render of the same messages; bad JSON and wrong shapes fail with
 * LW_ERR_INVALID_ARG and a message naming what; tojson of the tools keeps their key order. */
#include "test.h"

#include "llamaweb.h"
#include "test-chat-fixtures.h"
#include "test-chat-tools-expected.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Renders messages (JSON) with tools (JSON or NULL); returns the text (free()) or NULL with the error in err.
 */
static char *render(const char *tmpl, const char *msgs, const char *tools, char *err, size_t err_size) {
    lw_chat_template *t = NULL;
    err[0] = 0;
    if (lw_chat_template_parse(tmpl, strlen(tmpl), NULL, &t, err, err_size) != LW_OK) return NULL;
    lw_chat_params p;
    lw_chat_params_default(&p);
    p.bos_token = "<s>";
    p.eos_token = "</s>";
    p.tools = tools;
    p.now = 1721952000; /* 26 Jul 2024, the Llama 3.1 template's default date too */
    char *out = NULL;
    size_t n = 0;
    if (lw_chat_template_render_json(t, msgs, strlen(msgs), &p, &out, &n) != LW_OK)
        snprintf(err, err_size, "%s", lw_chat_template_error(t));
    else if (strlen(out) != n)
        snprintf(err, err_size, "length %zu != strlen %zu", n, strlen(out));
    lw_chat_template_free(t); /* the text is plain libc memory (no allocator given) */
    return out;
}

/* The first difference of a and b, for the failure message. */
static void report(const char *label, const char *got, const char *want) {
    size_t i = 0;
    while (got[i] && got[i] == want[i]) i++;
    size_t from = i > 40 ? i - 40 : 0;
    printf("  %s differs at byte %zu:\n    got  ...%.80s\n    want ...%.80s\n", label, i, got + from,
           want + from);
}

static void expect(const char *label, const char *tmpl, const char *msgs, const char *tools,
                   const char *want) {
    char err[256];
    char *got = render(tmpl, msgs, tools, err, sizeof err);
    CHECK_MSG(got != NULL, "%s: %s", label, err);
    if (!got) return;
    int same = strcmp(got, want) == 0;
    CHECK_MSG(same, "%s: the render differs from @huggingface/jinja's", label);
    if (!same) report(label, got, want);
    free(got);
}

int main(void) {
    /* the reference renders */
    expect("qwen2.5 tools", TMPL_QWEN25, MSGS_ASK, TOOLS_JSON, EXPECT_QWEN25_ASK);
    expect("qwen2.5 tool result", TMPL_QWEN25, MSGS_RESULT, TOOLS_JSON, EXPECT_QWEN25_RESULT);
    expect("qwen3 tools", TMPL_QWEN3, MSGS_ASK, TOOLS_JSON, EXPECT_QWEN3_ASK);
    expect("qwen3 tool result", TMPL_QWEN3, MSGS_RESULT, TOOLS_JSON, EXPECT_QWEN3_RESULT);
    expect("llama3.1 tools", TMPL_LLAMA31, MSGS_ASK, TOOLS_JSON, EXPECT_LLAMA31_ASK);
    expect("llama3.1 tool result", TMPL_LLAMA31, MSGS_RESULT, TOOLS_JSON, EXPECT_LLAMA31_RESULT);
    expect("mistral nemo tools", TMPL_MISTRAL_NEMO, MSGS_ASK, TOOLS_JSON, EXPECT_NEMO_ASK);
    expect("mistral nemo tool result", TMPL_MISTRAL_NEMO, MSGS_RESULT, TOOLS_JSON, EXPECT_NEMO_RESULT);

    /* the tool-calling turn as OpenAI clients send it, "content": null: Qwen3's template concatenates the
     * content (none + str fails in Jinja), so the render retries with the nulls as "" (llama.cpp does the
     * same for such templates); the others take none as they are; every render is the "" one's */
    {
        const char *from = "\"role\":\"assistant\",\"content\":\"\"", *to = "\"role\":\"assistant\",\"content\":null";
        const char *at = strstr(MSGS_RESULT, from);
        CHECK(at != NULL);
        char nulls[sizeof MSGS_RESULT + 8];
        snprintf(nulls, sizeof nulls, "%.*s%s%s", (int)(at - MSGS_RESULT), MSGS_RESULT, to, at + strlen(from));
        expect("qwen3 content null", TMPL_QWEN3, nulls, TOOLS_JSON, EXPECT_QWEN3_RESULT);
        expect("qwen2.5 content null", TMPL_QWEN25, nulls, TOOLS_JSON, EXPECT_QWEN25_RESULT);
        expect("llama3.1 content null", TMPL_LLAMA31, nulls, TOOLS_JSON, EXPECT_LLAMA31_RESULT);
        expect("mistral nemo content null", TMPL_MISTRAL_NEMO, nulls, TOOLS_JSON, EXPECT_NEMO_RESULT);
    }

    /* no tools (NULL and ""): the same as the structs' render, and no tool section */
    {
        const lw_chat_message msgs[] = {{"system", "Be brief."}, {"user", "Weather in Oslo?"}};
        const char *tmpls[] = {TMPL_QWEN25, TMPL_LLAMA31, TMPL_MISTRAL_NEMO};
        for (size_t k = 0; k < 3; k++) {
            lw_chat_template *t = NULL;
            char err[256];
            CHECK(lw_chat_template_parse(tmpls[k], strlen(tmpls[k]), NULL, &t, err, sizeof err) == LW_OK);
            lw_chat_params p;
            lw_chat_params_default(&p);
            p.bos_token = "<s>";
            p.eos_token = "</s>";
            p.now = 1721952000;
            char *a = NULL, *b = NULL, *c = NULL;
            CHECK(lw_chat_template_render(t, msgs, 2, &p, &a, NULL) == LW_OK);
            CHECK(lw_chat_template_render_json(t, MSGS_ASK, strlen(MSGS_ASK), &p, &b, NULL) == LW_OK);
            p.tools = "";
            CHECK(lw_chat_template_render_json(t, MSGS_ASK, strlen(MSGS_ASK), &p, &c, NULL) == LW_OK);
            CHECK(a && b && c && strcmp(a, b) == 0 && strcmp(a, c) == 0);
            CHECK(a && !strstr(a, "get_weather"));
            lw_chat_string_free(t, a);
            lw_chat_string_free(t, b);
            lw_chat_string_free(t, c);
            lw_chat_template_free(t);
        }
    }

    /* refusals name what was wrong */
    {
        struct {
            const char *msgs, *tools, *why;
        } bad[] = {
            {"[{\"role\": \"user\", \"content\": \"x\"}", NULL, "messages: bad JSON"},
            {"{\"role\": \"user\"}", NULL, "messages: not a JSON array"},
            {"[\"user\"]", NULL, "messages[0]: not a JSON object"},
            {MSGS_ASK, "[{\"type\": \"function\",}]", "tools: bad JSON"},
            {MSGS_ASK, "{\"type\": \"function\"}", "tools: not a JSON array"},
        };
        for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
            lw_chat_template *t = NULL;
            char err[256];
            CHECK(lw_chat_template_parse(TMPL_QWEN25, strlen(TMPL_QWEN25), NULL, &t, err, sizeof err) ==
                  LW_OK);
            lw_chat_params p;
            lw_chat_params_default(&p);
            p.tools = bad[i].tools;
            char *out = (char *)1;
            lw_status st = lw_chat_template_render_json(t, bad[i].msgs, strlen(bad[i].msgs), &p, &out, NULL);
            CHECK_MSG(st == LW_ERR_INVALID_ARG && out == NULL, "bad case %zu: status %d", i, (int)st);
            CHECK_MSG(strstr(lw_chat_template_error(t), bad[i].why) != NULL, "bad case %zu: '%s' lacks '%s'",
                      i, lw_chat_template_error(t), bad[i].why);
            lw_chat_template_free(t);
        }
    }

    /* a tool's keys keep their order through tojson (templates print tools as given) */
    {
        char err[256];
        const char *tmpl = "{% for t in tools %}{{ t | tojson }}|{% endfor %}{{ messages[0].content }}";
        char *out =
            render(tmpl, "[{\"content\": \"\\u00e9\\ud83d\\ude00 1.5e3\"}]",
                   "[{\"z\": 1, \"a\": [true, null, 2.5], \"m\": {\"y\": \"\\n\"}}]", err, sizeof err);
        CHECK_MSG(out != NULL, "%s", err);
        if (out) {
            CHECK_MSG(strcmp(out, "{\"z\": 1, \"a\": [true, null, 2.5], \"m\": {\"y\": "
                                  "\"\\n\"}}|\xc3\xa9\xf0\x9f\x98\x80 1.5e3") == 0,
                      "got %s", out);
            free(out);
        }
    }
    return test_summary("test-chat-tools");
}
