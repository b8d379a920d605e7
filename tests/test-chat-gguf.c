/* Chat templates end to end from a real GGUF file: ../shared/vocab/ggml-vocab-phi-3.gguf (llama.cpp's
 * Phi-3 vocabulary file) carries tokenizer.chat_template; it is read with the GGUF reader, its BOS/EOS token
 * texts are looked up in tokenizer.ggml.tokens, and the template is rendered for a small conversation and
 * compared with the Phi-3 prompt format written by hand. Skipped (77) when the file is absent. */
#include "chat/chat.h"
#include "test.h"

int main(void) {
    char path[1024], err[256];
    snprintf(path, sizeof path, "%s/vocab/ggml-vocab-phi-3.gguf", test_shared_dir());
    FILE *f = fopen(path, "rb");
    if (!f) {
        char why[1100];
        snprintf(why, sizeof why, "%s not found (shared test data)", path);
        test_skip(why);
    }
    fclose(f);

    lw_source *src = NULL;
    lw_gguf *g = NULL;
    CHECK(lw_source_open_file(path, NULL, &src, err, sizeof err) == LW_OK);
    if (!src) return test_summary("test-chat-gguf");
    lw_status st = lw_gguf_open(src, NULL, &g);
    CHECK_MSG(st == LW_OK, "%s", g ? lw_gguf_error(g) : "no memory");
    const char *tmpl = NULL, *bos = NULL, *eos = NULL;
    if (st == LW_OK) {
        CHECK(lw_chat_from_gguf(g, &tmpl, &bos, &eos) == LW_OK);
        CHECK(bos && !strcmp(bos, "<s>"));
        CHECK(eos && !strcmp(eos, "<|endoftext|>"));
        CHECK(tmpl && strstr(tmpl, "<|assistant|>"));
    }
    if (tmpl && bos && eos) {
        static const lw_chat_message msgs[] = {
            {"system", "You are a helpful assistant"},
            {"user", "Hello"},
            {"assistant", "Hi there"},
            {"user", "Who are you"},
        };
        char *out = NULL;
        size_t len = 0;
        st = lw_chat_apply(tmpl, msgs, 4, 1, bos, eos, NULL, &out, &len, err, sizeof err);
        CHECK_MSG(st == LW_OK, "%s", err);
        /* Phi-3-mini's template drops system messages and ends every user turn with the assistant header */
        const char *expected = "<s><|user|>\nHello<|end|>\n<|assistant|>\nHi there<|end|>\n"
                               "<|user|>\nWho are you<|end|>\n<|assistant|>\n";
        CHECK_MSG(out && !strcmp(out, expected), "got: %s", out ? out : "(null)");
        printf("  phi-3 GGUF template (%zu bytes) -> %zu-byte prompt: %s\n", strlen(tmpl), len,
               out && !strcmp(out, expected) ? "PASS" : "FAIL");
        free(out);
    }
    /* a GGUF without a template */
    char path2[1024];
    snprintf(path2, sizeof path2, "%s/models/stories260K.gguf", test_shared_dir());
    lw_source *src2 = NULL;
    lw_gguf *g2 = NULL;
    if (lw_source_open_file(path2, NULL, &src2, err, sizeof err) == LW_OK) {
        if (lw_gguf_open(src2, NULL, &g2) == LW_OK) CHECK(lw_chat_from_gguf(g2, &tmpl, NULL, NULL) == LW_ERR_NOT_FOUND && !tmpl);
        lw_gguf_close(g2);
        lw_source_close(src2);
    }
    lw_gguf_close(g);
    lw_source_close(src);
    return test_summary("test-chat-gguf");
}
