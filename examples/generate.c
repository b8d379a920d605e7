/* A complete program on the public API alone (include/llamaweb.h): load a GGUF model, tokenize a prompt,
 * generate text token by token and print it as it comes.
 *
 *     example-generate MODEL.gguf "Once upon a time" [N_TOKENS] [TEMPERATURE]
 *
 * Every call returns an lw_status; the message saying why is kept on the object the call was about
 * (lw_model_error, lw_context_error), never in a global. */
#include "llamaweb.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Called by lw_generate for each new token with the text it completes (possibly empty while a multi-byte
 * character is still incomplete). Returning non-zero would stop generation. */
static int print_token(void *user, int32_t token, const char *text, size_t len) {
    (void)token;
    fwrite(text, 1, len, (FILE *)user);
    fflush((FILE *)user);
    return 0;
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: %s MODEL.gguf PROMPT [N_TOKENS=64] [TEMPERATURE=0]\n", argv[0]);
        return 2;
    }
    const char *path = argv[1], *prompt = argv[2];
    int n_tokens = argc > 3 ? atoi(argv[3]) : 64;
    float temp = argc > 4 ? (float)atof(argv[4]) : 0.0f;

    /* 1. the model: weights, hyper-parameters and tokenizer; free it even when loading failed */
    lw_model *model = NULL;
    if (lw_model_load_file(path, NULL, &model) != LW_OK) {
        fprintf(stderr, "cannot load %s: %s\n", path, lw_model_error(model));
        lw_model_free(model);
        return 1;
    }

    /* 2. a context: the KV cache and every buffer a decode needs, allocated once here */
    lw_context_params cp = lw_context_default_params();
    cp.n_ctx = 512;
    lw_context *ctx = NULL;
    lw_sampler *sampler = NULL;
    int rc = 1;
    if (lw_context_create(model, &cp, &ctx) != LW_OK) {
        fprintf(stderr, "cannot create a context: %s\n", lw_context_error(ctx));
        goto done;
    }

    /* 3. a sampler: temperature 0 is greedy (the same text as llama.cpp) */
    lw_sampler_params sp = lw_sampler_default_params();
    sp.temp = temp;
    if (lw_sampler_create(lw_model_n_vocab(model), &sp, NULL, &sampler) != LW_OK) {
        fprintf(stderr, "out of memory\n");
        goto done;
    }

    /* 4. generate: the prompt is tokenized (with BOS where the model wants one), decoded, and continued */
    lw_generate_params gp = lw_generate_default_params();
    gp.n_predict = n_tokens;
    gp.on_token = print_token;
    gp.user = stdout;
    lw_generate_result res;
    fputs(prompt, stdout);
    if (lw_generate_text(ctx, sampler, prompt, strlen(prompt), 1, 0, &gp, &res) != LW_OK) {
        fprintf(stderr, "\ngeneration failed: %s\n", lw_context_error(ctx));
        goto done;
    }
    static const char *why[] = {"-", "end of generation", "length", "callback", "context full"};
    fprintf(stderr, "\n[%d prompt tokens, %d generated, stopped: %s]\n", res.n_prompt, res.n_generated,
            why[res.stop]);
    rc = 0;
done:
    lw_sampler_free(sampler);
    lw_context_free(ctx);
    lw_model_free(model);
    return rc;
}
