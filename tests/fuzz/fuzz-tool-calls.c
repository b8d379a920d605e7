/* libFuzzer target: hostile tool-call replies and tool definitions. The first byte picks the mode: its low
 * two bits a format (auto, hermes, llama3, mistral), bit 2 parse (0) or build the tools grammar (1) from the
 * rest. Invariants: no crash, no leak, no hang; a message on every failure; every parsed call has a name and
 * arguments that are a JSON object's text (between braces: the JSON reader checked the rest; JSON mode's
 * grammar is stricter about number lengths and whitespace runs than JSON), and the tool_calls JSON exists. */
#include "llamaweb.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size == 0) return 0;
    const char *text = (const char *)data + 1;
    const size_t len = size - 1;
    const lw_tool_format f = (lw_tool_format)(data[0] & 3);
    if (data[0] & 4) {
        lw_grammar *g = NULL;
        lw_status st =
            lw_grammar_from_tools(text, len, f, data[0] & 8 ? "f" : NULL, data[0] & 16, NULL, NULL, &g);
        if (st != LW_OK && g && !lw_grammar_error(g)[0]) abort(); /* a failure without a message */
        if (st == LW_OK) {
            static const char probe[] = "<tool_call>\n{\"name\": \"f\", \"arguments\": {}}\n</tool_call>";
            if (lw_grammar_accept_text(g, probe, sizeof probe - 1) == LW_OK) (void)lw_grammar_is_complete(g);
        }
        lw_grammar_free(g);
        return 0;
    }
    lw_tool_calls *tc = NULL;
    lw_status st = lw_tool_calls_parse(text, len, f, NULL, &tc);
    if (st != LW_OK) {
        if (tc && !lw_tool_calls_error(tc)[0]) abort();
        lw_tool_calls_free(tc);
        return 0;
    }
    for (size_t i = 0; i < lw_tool_calls_count(tc); i++) {
        const lw_tool_call *c = lw_tool_calls_get(tc, i);
        const size_t n = strlen(c->arguments);
        if (!c->name[0] || n < 2 || c->arguments[0] != '{' || c->arguments[n - 1] != '}') abort();
    }
    const char *js = lw_tool_calls_json(tc, NULL);
    if (!js) abort();
    (void)lw_tool_calls_content(tc, NULL);
    lw_tool_calls_free(tc);
    return 0;
}
