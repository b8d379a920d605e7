/* libFuzzer target: hostile GBNF grammars and JSON Schemas. The first byte picks the mode (even: the rest is
 * GBNF text; odd: a JSON Schema); the grammar, when it parses, then matches a fixed set of texts and the
 * bytes of the input itself. Invariants: no crash, no leak, no hang (limits), a message on every failure,
 * and a grammar that accepted a text whole reports it complete. */
#include "llamaweb.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size == 0) return 0;
    const char *text = (const char *)data + 1;
    size_t len = size - 1;
    lw_grammar *g = NULL;
    lw_status st = data[0] & 1 ? lw_grammar_from_json_schema(text, len, NULL, NULL, &g)
                               : lw_grammar_parse(text, len, NULL, NULL, NULL, &g);
    if (st != LW_OK) {
        if (g && !lw_grammar_error(g)[0]) abort(); /* a failure without a message */
        lw_grammar_free(g);
        return 0;
    }
    static const char *probes[] = {"", "a", "yes", "{\"a\": 1}", "[1, 2.5, \"x\"]", "null", "\xe6\x97\xa5", "((x))"};
    for (size_t i = 0; i < sizeof probes / sizeof probes[0]; i++) {
        lw_grammar_reset(g);
        if (lw_grammar_accept_text(g, probes[i], strlen(probes[i])) == LW_OK) (void)lw_grammar_is_complete(g);
    }
    lw_grammar_reset(g);
    for (size_t i = 0; i < len && i < 4096; i++)
        if (lw_grammar_accept_text(g, text + i, 1) != LW_OK) break;
    lw_grammar_free(g);
    return 0;
}
