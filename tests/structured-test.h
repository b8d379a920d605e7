/* Helpers shared by the structured-output tests (test-grammar-*.c, test-tool-calls.c): a generation's text
 * collected from lw_generate's callback, JSON strings for a log of outputs, and python's jsonschema over such
 * a log (one JSON object per line: {"schema": ..., "outputs": ["JSON text", ...]}, "vocab" optional). */
#ifndef LW_STRUCTURED_TEST_H
#define LW_STRUCTURED_TEST_H

#include "llamaweb.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The text of one generation. */
typedef struct text_buf {
    char s[16384]; /* the text, NUL-terminated (what does not fit is dropped) */
    size_t n;      /* its bytes                                               */
} text_buf;

/* lw_generate_params.on_token for a text_buf in user. */
static inline int text_buf_on_token(void *user, int32_t token, const char *text, size_t len) {
    text_buf *b = user;
    (void)token;
    if (b->n + len < sizeof b->s) memcpy(b->s + b->n, text, len), b->n += len;
    b->s[b->n] = 0;
    return 0;
}

/* A one-thread context of n_ctx cells and a sampler with llama.cpp's default chain (temperature temp) for m;
 * 0 on success (*c, *s NULL on failure; free them either way). */
static inline int gen_setup(lw_model *m, uint32_t n_ctx, float temp, lw_context **c, lw_sampler **s) {
    lw_context_params cp = lw_context_default_params();
    cp.n_ctx = n_ctx;
    cp.n_threads = 1;
    *c = NULL, *s = NULL;
    if (lw_context_create(m, &cp, c) != LW_OK) return -1;
    lw_sampler_params sp = lw_sampler_default_params();
    sp.temp = temp;
    return lw_sampler_create(lw_model_n_vocab(m), &sp, NULL, s) == LW_OK ? 0 : -1;
}

/* Writes s as a JSON string. */
static inline void put_json_string(FILE *f, const char *s) {
    fputc('"', f);
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\')
            fprintf(f, "\\%c", c);
        else if (c < 0x20)
            fprintf(f, "\\u%04x", c);
        else
            fputc(c, f);
    }
    fputc('"', f);
}

/* Validates every output of the log against its line's schema with python's jsonschema, printing the invalid
 * ones; returns how many (at most 100), or -1 when python3 or jsonschema is not there. */
static inline int jsonschema_validate_log(const char *path) {
    char cmd[2048];
    snprintf(
        cmd, sizeof cmd,
        "python3 -c \"\nimport json, sys\ntry:\n  import jsonschema\nexcept Exception:\n  sys.exit(200)\nbad "
        "= 0\n"
        "for line in open('%s'):\n  d = json.loads(line)\n  for o in d['outputs']:\n    try:\n"
        "      jsonschema.validate(json.loads(o), d['schema'])\n    except Exception as e:\n      bad += 1\n"
        "      print('invalid (' + d.get('vocab', '-') + '):', repr(o), str(e)[:200])\n"
        "sys.exit(min(bad, 100))\n\" 2>&1",
        path);
    int rc = system(cmd);
    if (rc == -1 || (rc >> 8) == 200 || (rc >> 8) == 127) return -1;
    return (rc >> 8) & 0xFF;
}

#endif
