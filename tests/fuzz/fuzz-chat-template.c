/* libFuzzer target for the chat-template engine: any bytes are parsed as a Jinja template and, when they
 * parse, rendered for a fixed conversation under small limits (steps, output, memory), so every input ends
 * quickly with a result or an error status and never crashes or hangs. Built with -DLW_FUZZ=ON (clang,
 * -fsanitize=fuzzer,address,undefined); run with `scripts/fuzz.sh fuzz-chat-template`; its seeds in
 * tests/fuzz/seeds/chat-template are replayed by the ordinary test run (replay-chat-template). */
#include "chat/chat.h"

#include <stdint.h>
#include <string.h>

static const lw_chat_message conversation[] = {
    {"system", "You are a helpful assistant"},
    {"user", "Hello"},
    {"assistant", "<think>\nhm\n</think>\n\nHi there"},
    {"user", "Who are you \xc3\xa9"},
    {"tool", NULL},
};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    lw_chat_template *t = NULL;
    char err[128];
    if (lw_chat_template_parse((const char *)data, size, NULL, &t, err, sizeof err) != LW_OK) {
        if (t) __builtin_trap(); /* a failed parse returns no object */
        return 0;
    }
    for (int variant = 0; variant < 2; variant++) {
        lw_chat_params p;
        lw_chat_params_default(&p);
        p.bos_token = "<s>";
        p.eos_token = "</s>";
        p.add_generation_prompt = variant == 0;
        p.enable_thinking = variant == 0 ? -1 : 1;
        p.now = 1741182307;
        p.max_steps = 100000;
        p.max_output = 1 << 16;
        p.max_memory = 8 << 20;
        char *out = NULL;
        size_t len = 0;
        lw_status st = lw_chat_template_render(t, conversation, variant == 0 ? 4 : 5, &p, &out, &len);
        if (st == LW_OK) {
            if (!out || out[len] != 0 || len > p.max_output) __builtin_trap();
            lw_chat_string_free(t, out);
        } else {
            if (out || !lw_chat_template_error(t)[0]) __builtin_trap(); /* failures say why */
        }
    }
    lw_chat_template_free(t);
    return 0;
}
