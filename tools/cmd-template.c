/* `llamaweb template (-m FILE.gguf | -t FILE.jinja) [messages] [options]`: renders a chat template for a
 * conversation and prints the prompt exactly (no trailing newline added), e.g. to check how a GGUF file's
 * own template formats a chat before tokenizing it. */
#include "cli.h"
#include "chat/chat.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int tmpl_usage(void) {
    fprintf(stderr,
            "usage: llamaweb template (-m FILE.gguf | -t FILE.jinja) [messages] [options]\n"
            "  -m FILE         use the GGUF file's tokenizer.chat_template and BOS/EOS tokens\n"
            "  -t FILE         use a template file instead\n"
            "  -s TEXT         a system message     (messages keep the order given;\n"
            "  -u TEXT         a user message        without any, a demo conversation:\n"
            "  -a TEXT         an assistant message  system, user, assistant, user)\n"
            "  --tool TEXT     a tool message (a tool's result)\n"
            "  --tools FILE    OpenAI tools array (JSON): the template's `tools`\n"
            "  --bos T --eos T special token texts (default: the GGUF's, else empty)\n"
            "  --no-gen        no generation prompt (add_generation_prompt=false)\n"
            "  --think 0|1     set enable_thinking (default: undefined)\n"
            "  --stats         print steps and sizes to stderr\n");
    return 2;
}

int lw__cmd_template(int argc, char **argv) {
    const char *model = NULL, *file = NULL, *bos = NULL, *eos = NULL, *tools_file = NULL;
    int add_gen = 1, think = -1, stats = 0;
    lw_chat_message *msgs = calloc((size_t)argc + 1, sizeof *msgs);
    size_t n = 0;
    if (!msgs) return 1;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        int more = i + 1 < argc;
        if (!strcmp(a, "-m") && more) model = argv[++i];
        else if (!strcmp(a, "-t") && more) file = argv[++i];
        else if (!strcmp(a, "-s") && more) msgs[n++] = (lw_chat_message){"system", argv[++i]};
        else if (!strcmp(a, "-u") && more) msgs[n++] = (lw_chat_message){"user", argv[++i]};
        else if (!strcmp(a, "-a") && more) msgs[n++] = (lw_chat_message){"assistant", argv[++i]};
        else if (!strcmp(a, "--tool") && more) msgs[n++] = (lw_chat_message){"tool", argv[++i]};
        else if (!strcmp(a, "--tools") && more) tools_file = argv[++i];
        else if (!strcmp(a, "--bos") && more) bos = argv[++i];
        else if (!strcmp(a, "--eos") && more) eos = argv[++i];
        else if (!strcmp(a, "--no-gen")) add_gen = 0;
        else if (!strcmp(a, "--think") && more) think = atoi(argv[++i]) != 0;
        else if (!strcmp(a, "--stats")) stats = 1;
        else {
            free(msgs);
            return tmpl_usage();
        }
    }
    if ((!model) == (!file)) {
        free(msgs);
        return tmpl_usage();
    }
    static const lw_chat_message demo[] = {
        {"system", "You are a helpful assistant."},
        {"user", "Hello!"},
        {"assistant", "Hi! How can I help you today?"},
        {"user", "What is the capital of France?"},
    };
    const lw_chat_message *conv = n ? msgs : demo;
    size_t nconv = n ? n : sizeof demo / sizeof demo[0];

    int rc = 1;
    char err[256] = "";
    lw_source *src = NULL;
    lw_gguf *g = NULL;
    lw_chat_template *t = NULL;
    char *owned = NULL, *out = NULL, *tools = NULL;
    const char *tmpl = NULL;
    size_t tlen = 0, olen = 0;
    if (model) {
        const char *gbos = NULL, *geos = NULL;
        if (lw_source_open_file(model, NULL, &src, err, sizeof err) != LW_OK) {
            fprintf(stderr, "llamaweb template: %s\n", err);
            goto done;
        }
        if (lw_gguf_open(src, NULL, &g) != LW_OK) {
            fprintf(stderr, "llamaweb template: %s: %s\n", model, g ? lw_gguf_error(g) : "out of memory");
            goto done;
        }
        if (lw_chat_from_gguf(g, &tmpl, &gbos, &geos) != LW_OK) {
            fprintf(stderr, "llamaweb template: %s has no tokenizer.chat_template\n", model);
            goto done;
        }
        tlen = strlen(tmpl);
        if (!bos) bos = gbos;
        if (!eos) eos = geos;
    } else {
        owned = lw__cli_read_file(file, &tlen);
        if (!owned) {
            fprintf(stderr, "llamaweb template: cannot read %s\n", file);
            goto done;
        }
        tmpl = owned;
    }
    if (lw_chat_template_parse(tmpl, tlen, NULL, &t, err, sizeof err) != LW_OK) {
        fprintf(stderr, "llamaweb template: %s\n", err);
        goto done;
    }
    if (tools_file && !(tools = lw__cli_read_file(tools_file, &(size_t){0}))) {
        fprintf(stderr, "llamaweb template: cannot read %s\n", tools_file);
        goto done;
    }
    lw_chat_params p;
    lw_chat_params_default(&p);
    p.tools = tools;
    p.add_generation_prompt = add_gen;
    p.bos_token = bos;
    p.eos_token = eos;
    p.enable_thinking = think;
    if (lw_chat_template_render(t, conv, nconv, &p, &out, &olen) != LW_OK) {
        fprintf(stderr, "llamaweb template: %s\n", lw_chat_template_error(t));
        goto done;
    }
    fwrite(out, 1, olen, stdout);
    if (stats)
        fprintf(stderr, "template %zu bytes, %zu messages, prompt %zu bytes, %llu steps\n", tlen, nconv, olen,
                (unsigned long long)lw_chat_template_last_steps(t));
    rc = 0;
done:
    lw_chat_string_free(t, out);
    lw_chat_template_free(t);
    free(owned);
    free(tools);
    lw_gguf_close(g);
    lw_source_close(src);
    free(msgs);
    return rc;
}
