/* The `llamaweb template` command: renders a template file and a GGUF file's own template for messages
 * given on the command line (tools from a file, tool messages too); the prompt is printed exactly. Skipped
 * (77) without the CLI ($LW_CLI). */
#include "test.h"

/* Runs a shell command and captures its stdout (at most cap-1 bytes). Returns the exit status. */
static int run(const char *cmd, char *out, size_t cap) {
    FILE *p = popen(cmd, "r");
    if (!p) return -1;
    size_t n = fread(out, 1, cap - 1, p);
    out[n] = 0;
    int st = pclose(p);
    return st == -1 ? -1 : (st >> 8) & 0xff;
}

int main(void) {
    const char *cli = getenv("LW_CLI");
    if (!cli || !*cli) test_skip("LW_CLI not set (run through ctest)");
    char path[1024], cmd[4096], out[4096];
    snprintf(path, sizeof path, "%s/chat-cli-template.jinja", test_tmp_dir());
    char mk[1200];
    snprintf(mk, sizeof mk, "mkdir -p '%s'", test_tmp_dir());
    CHECK(system(mk) == 0);
    FILE *f = fopen(path, "wb");
    CHECK(f != NULL);
    if (!f) return test_summary("test-chat-cli");
    /* ChatML with the bos token in front, as a file with a trailing newline (dropped by Jinja2 rules) */
    fputs("{{ bos_token }}{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
          "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}\n",
          f);
    fclose(f);

    snprintf(cmd, sizeof cmd, "'%s' template -t '%s' -s 'Be brief.' -u 'Hi there' --bos '<s>'", cli, path);
    CHECK(run(cmd, out, sizeof out) == 0);
    CHECK_MSG(!strcmp(out, "<s><|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi there<|im_end|>\n"
                           "<|im_start|>assistant\n"),
              "got: %s", out);
    snprintf(cmd, sizeof cmd, "'%s' template -t '%s' -u 'q' -a 'r' --no-gen", cli, path);
    CHECK(run(cmd, out, sizeof out) == 0);
    CHECK_MSG(!strcmp(out, "<|im_start|>user\nq<|im_end|>\n<|im_start|>assistant\nr<|im_end|>\n"), "got: %s", out);
    /* --tools FILE: the template's `tools`; --tool TEXT: a tool message */
    char tpath[1024], tools_path[1024];
    snprintf(tpath, sizeof tpath, "%s/chat-cli-tools.jinja", test_tmp_dir());
    snprintf(tools_path, sizeof tools_path, "%s/chat-cli-tools.json", test_tmp_dir());
    FILE *tf = fopen(tpath, "wb"), *jf = fopen(tools_path, "wb");
    CHECK(tf && jf);
    if (tf) {
        fputs("{% for t in tools or [] %}[{{ t.function.name }}: {{ t.function.parameters | tojson }}]{% "
              "endfor %}"
              "{% for m in messages %}<{{ m.role }}>{{ m.content }}{% endfor %}",
              tf);
        fclose(tf);
    }
    if (jf) {
        fputs(
            "[{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"parameters\": {\"type\": "
            "\"object\"}}}]",
            jf);
        fclose(jf);
    }
    snprintf(cmd, sizeof cmd, "'%s' template -t '%s' --tools '%s' -u 'Oslo?' --tool '{\"t\": 21}'", cli,
             tpath, tools_path);
    CHECK(run(cmd, out, sizeof out) == 0);
    CHECK_MSG(!strcmp(out, "[get_weather: {\"type\": \"object\"}]<user>Oslo?<tool>{\"t\": 21}"), "got: %s",
              out);
    snprintf(cmd, sizeof cmd, "'%s' template -t '%s' -u 'Oslo?'", cli, tpath);
    CHECK(run(cmd, out, sizeof out) == 0);
    CHECK_MSG(!strcmp(out, "<user>Oslo?"), "got: %s", out); /* no tools: none */
    snprintf(cmd, sizeof cmd, "'%s' template -t '%s' --tools '%s' -u x 2>/dev/null", cli, tpath, tpath);
    CHECK(run(cmd, out, sizeof out) == 1 && out[0] == 0); /* not JSON */
    /* errors: exit status 1 and nothing on stdout */
    snprintf(cmd, sizeof cmd, "'%s' template -t /nonexistent.jinja 2>/dev/null", cli);
    CHECK(run(cmd, out, sizeof out) == 1 && out[0] == 0);
    snprintf(cmd, sizeof cmd, "'%s' template 2>/dev/null", cli);
    CHECK(run(cmd, out, sizeof out) == 2);

    /* a GGUF file's own template (Phi-3 vocab from the shared data), when present */
    char gguf[1024];
    snprintf(gguf, sizeof gguf, "%s/vocab/ggml-vocab-phi-3.gguf", test_shared_dir());
    FILE *g = fopen(gguf, "rb");
    if (g) {
        fclose(g);
        snprintf(cmd, sizeof cmd, "'%s' template -m '%s' -u 'Hello'", cli, gguf);
        CHECK(run(cmd, out, sizeof out) == 0);
        CHECK_MSG(!strcmp(out, "<s><|user|>\nHello<|end|>\n<|assistant|>\n"), "got: %s", out);
    } else {
        printf("note: %s absent, GGUF part not run\n", gguf);
    }
    return test_summary("test-chat-cli");
}
