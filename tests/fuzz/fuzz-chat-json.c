/* libFuzzer target: the conversation and tools that JS hands the chat templates as JSON text
 * (lw_wasm_chat_render_json -> lw_chat_template_render_json with lw_chat_params.tools): hostile JSON, deep
 * nesting, odd members (tool_calls that are not arrays, arguments that are objects or numbers, content
 * null or a list), rendered by real templates that read them (Qwen3, Llama 3.2, Mistral Nemo, from
 * tests/fuzz/seeds/chat-template, found beside this file) and by a small one that walks every value.
 * Input: byte 0 picks the template and add_generation_prompt; the rest is the messages JSON, then, after a
 * NUL byte, the tools JSON (none without a NUL). Invariants: no crash or leak, a render ends within its
 * limits, a result is NUL-terminated, a failure has a message. Seeds: tests/fuzz/seeds/chat-json. Run with
 * `scripts/fuzz.sh fuzz-chat-json`. */
#include "chat/chat.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Every value of every message and tool, recursively (the JSON reader's values as the template sees them). */
static const char walker[] =
    "{%- macro v(x, d) -%}"
    "{%- if d > 6 -%}...{%- elif x is mapping -%}{ {%- for k in x %}{{ k }}:{{ v(x[k], d + 1) }},"
    "{%- endfor -%} }"
    "{%- elif x is string -%}{{ x | length }}{{ x[:8] }}"
    "{%- elif x is iterable -%}[ {%- for y in x %}{{ v(y, d + 1) }};{% endfor -%} ]"
    "{%- else -%}{{ x }}{%- endif -%}"
    "{%- endmacro -%}"
    "{%- for m in messages %}{{ v(m, 0) }}|{{ m.role }}|{{ m.content | tojson }}\n"
    "{%- if m.tool_calls %}{% for c in m.tool_calls %}{{ c.function.name }}"
    "{{ c.function.arguments | tojson }}{% endfor %}{% endif %}{% endfor -%}"
    "{%- if tools %}{{ tools | tojson(indent=2) }}{% for t in tools %}{{ v(t, 0) }}{% endfor %}"
    "{% endif %}{% if add_generation_prompt %}>{% endif %}";

static const char *const files[] = {"Qwen-Qwen3-0.6B.txt", "meta-llama-Llama-3.2-3B-Instruct.txt",
                                    "mistralai-Mistral-Nemo-Instruct-2407.txt"};
#define N_FILES (sizeof files / sizeof files[0])
static lw_chat_template *templates[N_FILES + 1];
static size_t n_templates;

static void add_template(const char *src, size_t len) {
    char err[256];
    if (lw_chat_template_parse(src, len, NULL, &templates[n_templates], err, sizeof err) != LW_OK) {
        fprintf(stderr, "fuzz-chat-json: a template does not parse: %s\n", err);
        abort();
    }
    n_templates++;
}

/* The seeds' templates, read from beside this source file (its path as the compiler was given it: absolute
 * under CMake); those not found are left out. */
static void init(void) {
    add_template(walker, sizeof walker - 1);
    char dir[4096];
    snprintf(dir, sizeof dir, "%s", __FILE__);
    char *slash = strrchr(dir, '/');
    if (slash)
        slash[1] = 0;
    else
        dir[0] = 0;
    for (size_t i = 0; i < N_FILES; i++) {
        char path[8192];
        snprintf(path, sizeof path, "%sseeds/chat-template/%s", dir, files[i]);
        FILE *f = fopen(path, "rb");
        if (!f) continue;
        static char buf[1 << 16];
        size_t n = fread(buf, 1, sizeof buf, f);
        fclose(f);
        add_template(buf, n);
    }
}

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc, (void)argv;
    if (!n_templates) init();
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (!n_templates) init(); /* the replay calls no initializer */
    if (size < 1 || size > (1 << 16)) return 0;
    lw_chat_template *t = templates[data[0] % n_templates];
    const char *messages = (const char *)data + 1;
    size_t n = size - 1;
    const char *nul = memchr(messages, 0, n);
    char *tools = NULL; /* NUL-terminated, as JS passes it */
    if (nul) {
        size_t k = (size_t)(nul - messages), tl = n - k - 1;
        tools = malloc(tl + 1);
        if (!tools) return 0;
        memcpy(tools, nul + 1, tl);
        tools[tl] = 0;
        n = k;
    }
    lw_chat_params p;
    lw_chat_params_default(&p);
    p.bos_token = "<s>";
    p.eos_token = "</s>";
    p.add_generation_prompt = (data[0] >> 4) & 1;
    p.now = 1741182307;
    p.max_steps = 200000;
    p.max_output = 1 << 16;
    p.max_memory = 8 << 20;
    p.tools = tools;
    char *out = NULL;
    size_t len = 0;
    lw_status st = lw_chat_template_render_json(t, messages, n, &p, &out, &len);
    if (st == LW_OK) {
        if (!out || out[len] != 0 || len > p.max_output) abort();
        lw_chat_string_free(t, out);
    } else if (out || !lw_chat_template_error(t)[0]) {
        abort(); /* failures say why */
    }
    free(tools);
    return 0;
}
