/* The generation state machine (lw_gen_*) on its own, with a small SentencePiece vocabulary written by the
 * GGUF writer and scripted token ids (the machine decodes and samples nothing, so no model is needed):
 *  - the steps: the prompt's decode at its cell, one decode per token after it, the last one left pending or
 *    (decode_last) decoded, and where each goes;
 *  - UTF-8 characters split across byte tokens come out whole; one never completed comes at the end as
 * U+FFFD;
 *  - stop strings split across pieces, at the start, inside a piece, overlapping prefixes, and one completed
 * by the end's U+FFFD; random token sequences against a reference (the whole text cut before the first stop
 *    string): what is handed on is always a prefix of the reference (never taken back) and ends equal to it;
 *  - end of generation (its text with special, ignore_eog going past it), n_predict (0 included), a full
 *    context (a prompt past it refused), lw_gen_stop (after a token, after the end: relabelled), resuming a
 *    generation with its pending token, two machines interleaved, errors. */
#include "llamaweb.h"
#include "test.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The vocabulary's words after the specials and the 256 byte tokens (ids 259 on). */
static const char *const words[] = {"\xe2\x96\x81Hello",
                                    "\xe2\x96\x81wor",
                                    "ld",
                                    "ST",
                                    "OP",
                                    "S",
                                    "TOP",
                                    "x",
                                    "\xe2\x96\x81",
                                    "a",
                                    "b",
                                    "ab",
                                    "<|end|>"};
enum { N_WORDS = sizeof words / sizeof words[0], FIRST_WORD = 259, N_TOKENS = FIRST_WORD + N_WORDS };
enum { HELLO = 259, WOR, LD, ST, OP, S_, TOP, X, SPACE, A, B, AB, END };

/* Writes the vocabulary file; returns 1 on success. <|end|> is a control token listed as EOT (end of
 * generation besides </s>). */
static int write_vocab(const char *path) {
    static char text[N_TOKENS][16];
    lw_gguf_str toks[N_TOKENS];
    float scores[N_TOKENS];
    int32_t types[N_TOKENS];
    for (int i = 0; i < N_TOKENS; i++) {
        if (i < 3)
            snprintf(text[i], sizeof text[i], "%s", i == 0 ? "<unk>" : i == 1 ? "<s>" : "</s>");
        else if (i < FIRST_WORD)
            snprintf(text[i], sizeof text[i], "<0x%02X>", i - 3);
        else
            snprintf(text[i], sizeof text[i], "%s", words[i - FIRST_WORD]);
        toks[i] = (lw_gguf_str){strlen(text[i]), text[i]};
        scores[i] = -(float)i;
        types[i] = i == 0 ? 2 : i < 3 || i == END ? 3 : i < FIRST_WORD ? 6 : 1;
    }
    lw_gguf_writer *w = NULL;
    if (lw_gguf_writer_new(NULL, &w) != LW_OK) return 0;
    int ok =
        lw_gguf_writer_set_str(w, "tokenizer.ggml.model", "llama") == LW_OK &&
        lw_gguf_writer_set_arr(w, "tokenizer.ggml.tokens", LW_GGUF_STRING, N_TOKENS, toks) == LW_OK &&
        lw_gguf_writer_set_arr(w, "tokenizer.ggml.scores", LW_GGUF_FLOAT32, N_TOKENS, scores) == LW_OK &&
        lw_gguf_writer_set_arr(w, "tokenizer.ggml.token_type", LW_GGUF_INT32, N_TOKENS, types) == LW_OK &&
        lw_gguf_writer_set_u32(w, "tokenizer.ggml.bos_token_id", 1) == LW_OK &&
        lw_gguf_writer_set_u32(w, "tokenizer.ggml.eos_token_id", 2) == LW_OK &&
        lw_gguf_writer_set_u32(w, "tokenizer.ggml.eot_token_id", END) == LW_OK &&
        lw_gguf_writer_write_file(w, path, 0) == LW_OK;
    lw_gguf_writer_free(w);
    return ok;
}

/* A byte token's id. */
static int32_t byte_id(unsigned b) {
    return (int32_t)(3 + b);
}

/* One generation run over scripted tokens: what the caller saw. */
typedef struct run {
    char text[4096];     /* text + tail handed on, in order            */
    size_t len;          /* its bytes                                  */
    char out[4096];      /* the tokens' own text (pieces + rest)       */
    size_t out_len;      /* its bytes                                  */
    int pushed;          /* tokens pushed before the end               */
    int decodes;         /* one-token decodes asked                    */
    uint32_t last_pos;   /* cell of the last decode asked              */
    int last_decoded;    /* 1: the end step asked to decode the last token */
    int prefix_ok;       /* every handed-on text was a prefix of want  */
    lw_stop_reason stop; /* why it ended                               */
} run;

static void append(char *dst, size_t *len, const char *s, size_t n) {
    if (*len + n < 4096) memcpy(dst + *len, s, n), *len += n;
}

/* Drives machine g over tokens[0..n) as a caller would (after a prompt of n_prompt ids at pos). want (may be
 * NULL): the reference text, for the prefix property. stop_after: call lw_gen_stop after this many pushes
 * (0: never). */
static void drive(lw_gen *g, const int32_t *tokens, int n, uint32_t pos, int n_prompt, const char *want,
                  int stop_after, run *r) {
    memset(r, 0, sizeof *r);
    r->prefix_ok = 1;
    static const int32_t prompt[8] = {1, HELLO, WOR, LD, X, A, B, AB};
    lw_gen_step st;
    CHECK(lw_gen_start(g, prompt, (size_t)n_prompt, pos, &st) == LW_OK);
    CHECK(st.n_ids == (size_t)n_prompt && st.pos == pos && st.token == -1 && st.stop == LW_STOP_NONE);
    int i = 0;
    while (st.sample) {
        if (i >= n) break; /* the script ran out: the caller stops */
        CHECK(lw_gen_push(g, tokens[i++], &st) == LW_OK);
        r->pushed++;
        append(r->out, &r->out_len, st.piece, st.piece_len);
        append(r->text, &r->len, st.text, st.text_len);
        if (want && (r->len > strlen(want) || memcmp(r->text, want, r->len))) r->prefix_ok = 0;
        if (stop_after && r->pushed == stop_after) {
            lw_gen_step e;
            CHECK(lw_gen_stop(g, LW_STOP_CALLBACK, &e) == LW_OK);
            CHECK(e.text_len == 0);
            st = e;
        }
        if (st.sample) {
            CHECK(st.n_ids == 1 && st.ids[0] == tokens[i - 1]);
            r->decodes++;
            r->last_pos = st.pos;
        }
    }
    if (st.sample) { /* ended by the script */
        CHECK(lw_gen_stop(g, LW_STOP_CALLBACK, &st) == LW_OK);
    }
    r->last_decoded = st.n_ids == 1 && st.token >= 0;
    if (r->last_decoded) {
        r->last_pos = st.pos;
        CHECK(st.ids[0] == st.token);
    }
    append(r->out, &r->out_len, st.rest, st.rest_len);
    append(r->text, &r->len, st.tail, st.tail_len);
    r->text[r->len] = 0;
    r->out[r->out_len] = 0;
    r->stop = st.stop;
}

/* A machine over v with params p in its own buffer (freed by done). */
static lw_gen *make(const lw_vocab *v, const lw_gen_params *p, char **buf) {
    static lw_gen gens[4];
    static int k;
    lw_gen *g = &gens[k++ & 3];
    size_t need = lw_gen_buffer_size(v, p);
    CHECK(need > 0);
    *buf = malloc(need);
    CHECK(*buf != NULL);
    CHECK_MSG(lw_gen_init(g, v, p, *buf, need) == LW_OK, "%s", lw_gen_error(g));
    return g;
}

/* The basic steps: prompt decode, one decode per token at consecutive cells, the last pending. */
static void check_steps(const lw_vocab *v) {
    lw_gen_params p = lw_gen_default_params();
    p.n_predict = 4;
    char *buf;
    lw_gen *g = make(v, &p, &buf);
    const int32_t t[] = {HELLO, WOR, LD, X, X};
    run r;
    drive(g, t, 5, 10, 3, NULL, 0, &r);
    CHECK(r.stop == LW_STOP_LENGTH && r.pushed == 4 && r.decodes == 3 && r.last_pos == 15 && !r.last_decoded);
    CHECK_MSG(!strcmp(r.text, " Hello worldx") && !strcmp(r.out, r.text), "'%s'", r.text);
    /* decode_last: the 4th token is decoded too, at the next cell */
    p.decode_last = 1;
    free(buf);
    g = make(v, &p, &buf);
    drive(g, t, 5, 10, 3, NULL, 0, &r);
    CHECK(r.stop == LW_STOP_LENGTH && r.pushed == 4 && r.last_decoded && r.last_pos == 16);
    /* n_predict 0: the prompt only */
    p.n_predict = 0;
    free(buf);
    g = make(v, &p, &buf);
    lw_gen_step st;
    const int32_t prompt[2] = {1, HELLO};
    CHECK(lw_gen_start(g, prompt, 2, 0, &st) == LW_OK);
    CHECK(st.n_ids == 2 && !st.sample && st.stop == LW_STOP_LENGTH);
    CHECK(lw_gen_push(g, X, &st) == LW_ERR_INVALID_ARG && strstr(lw_gen_error(g), "no generation"));
    CHECK(lw_gen_stop(g, LW_STOP_CALLBACK, &st) == LW_OK && st.stop == LW_STOP_CALLBACK && st.n_ids == 0);
    /* no prompt: sample from the caller's logits at once */
    p.n_predict = -1;
    free(buf);
    g = make(v, &p, &buf);
    CHECK(lw_gen_start(g, NULL, 0, 7, &st) == LW_OK && st.n_ids == 0 && st.sample);
    CHECK(lw_gen_push(g, A, &st) == LW_OK && st.n_ids == 1 && st.pos == 7 && st.sample &&
          st.n_generated == 1);
    free(buf);
}

/* UTF-8 split across tokens: é = C3 A9, 🙂 = F0 9F 99 82. */
static void check_utf8(const lw_vocab *v) {
    lw_gen_params p = lw_gen_default_params();
    char *buf;
    lw_gen *g = make(v, &p, &buf);
    const int32_t t[] = {
        A, byte_id(0xC3), byte_id(0xA9), byte_id(0xF0), byte_id(0x9F), byte_id(0x99), byte_id(0x82), B};
    lw_gen_step st;
    CHECK(lw_gen_start(g, NULL, 0, 0, &st) == LW_OK);
    const char *want[] = {"a", "", "\xc3\xa9", "", "", "", "\xf0\x9f\x99\x82", "b"};
    for (int i = 0; i < 8; i++) {
        CHECK(lw_gen_push(g, t[i], &st) == LW_OK);
        CHECK_MSG(st.text_len == strlen(want[i]) && !memcmp(st.text, want[i], st.text_len), "token %d", i);
    }
    /* a character that never completes: U+FFFD at the end, in tail and rest */
    run r;
    const int32_t u[] = {A, byte_id(0xE2), byte_id(0x82)};
    drive(g, u, 3, 0, 0, NULL, 0, &r);
    CHECK(r.stop == LW_STOP_CALLBACK && !strcmp(r.text, "a\xef\xbf\xbd") && !strcmp(r.out, "a\xef\xbf\xbd"));
    free(buf);
}

/* Stop strings: hand-picked cases. */
static void check_stops(const lw_vocab *v) {
    const char *stops[] = {"STOP", "wor", "aab", "\xc3\xa9!"};
    lw_gen_params p = lw_gen_default_params();
    p.stop = stops;
    p.n_stop = 2;
    p.decode_last = 1;
    char *buf;
    lw_gen *g = make(v, &p, &buf);
    run r;
    /* split across pieces: "x" "ST" "OP": "ST" held back, then the stop; the last token is decoded */
    const int32_t t1[] = {X, ST, OP, X};
    drive(g, t1, 4, 0, 1, NULL, 0, &r);
    CHECK_MSG(r.stop == LW_STOP_STRING && r.pushed == 3 && !strcmp(r.text, "x") && r.last_decoded, "'%s'",
              r.text);
    CHECK(!strcmp(r.out, "xSTOP")); /* the tokens' own text keeps it (what the cache holds) */
    /* a held prefix that does not complete is handed on with the next piece: "ST" "x" */
    const int32_t t2[] = {ST, X, S_, TOP};
    lw_gen_step st;
    CHECK(lw_gen_start(g, NULL, 0, 0, &st) == LW_OK);
    CHECK(lw_gen_push(g, ST, &st) == LW_OK && st.text_len == 0);
    CHECK(lw_gen_push(g, X, &st) == LW_OK && st.text_len == 3 && !memcmp(st.text, "STx", 3));
    drive(g, t2, 4, 0, 0, NULL, 0, &r);
    CHECK(r.stop == LW_STOP_STRING && !strcmp(r.text, "STx") && r.pushed == 4);
    /* inside one piece (" wor" holds "wor" after a space) and at the very start */
    const int32_t t3[] = {HELLO, WOR, LD};
    drive(g, t3, 3, 0, 0, NULL, 0, &r);
    CHECK_MSG(r.stop == LW_STOP_STRING && !strcmp(r.text, " Hello ") && r.pushed == 2, "'%s'", r.text);
    /* an unfinished prefix at the end is handed on in tail: "x" "S" then the script stops */
    const int32_t t4[] = {X, S_};
    drive(g, t4, 2, 0, 0, NULL, 0, &r);
    CHECK(r.stop == LW_STOP_CALLBACK && !strcmp(r.text, "xS"));
    /* overlapping prefixes: stop "aab" over "a" "a" "a" "b" */
    p.stop = stops + 2;
    p.n_stop = 1;
    free(buf);
    g = make(v, &p, &buf);
    const int32_t t5[] = {A, A, A, B};
    drive(g, t5, 4, 0, 0, NULL, 0, &r);
    CHECK_MSG(r.stop == LW_STOP_STRING && !strcmp(r.text, "a"), "'%s'", r.text);
    /* lengths given: "é!" as 3 of its bytes is "é" (a stop string need not be NUL-terminated) */
    const size_t lens[] = {2};
    p.stop = stops + 3;
    p.stop_len = lens;
    free(buf);
    g = make(v, &p, &buf);
    const int32_t t6[] = {A, byte_id(0xC3), byte_id(0xA9), B};
    drive(g, t6, 4, 0, 0, NULL, 0, &r);
    CHECK(r.stop == LW_STOP_STRING && !strcmp(r.text, "a") && r.pushed == 3);
    free(buf);
}

/* Random token sequences over words and a few bytes, random stop strings of random characters: the text
 * handed on equals the reference and is never taken back. */
static void check_stops_random(const lw_vocab *v) {
    uint64_t s = 0x1234567;
    int hits = 0;
    for (int iter = 0; iter < 3000; iter++) {
        int32_t t[24];
        char full[1024];
        size_t full_len = 0;
        for (int i = 0; i < 24; i++) {
            s = s * 6364136223846793005ull + 1442695040888963407ull;
            unsigned k = (unsigned)(s >> 33) % (END - HELLO + 3);
            t[i] = k < (unsigned)(END - HELLO)    ? HELLO + (int32_t)k
                   : k == (unsigned)(END - HELLO) ? byte_id(0xC3)
                                                  : byte_id(0xA9);
        }
        /* stop strings: pieces of the text of another random run, 1 to 5 bytes */
        char stop_text[3][12];
        const char *stops[3];
        for (int j = 0; j < 3; j++) {
            s = s * 6364136223846793005ull + 1442695040888963407ull;
            static const char *const alpha[] = {"S", "T", "O", "P",        "a", "b",
                                                "x", " ", "w", "\xc3\xa9", "l", "d"};
            size_t n = 1 + (s >> 40) % 4, at = 0;
            for (size_t q = 0; q < n; q++) {
                const char *c = alpha[(s >> (8 + 4 * q)) % 12];
                memcpy(stop_text[j] + at, c, strlen(c));
                at += strlen(c);
            }
            stop_text[j][at] = 0;
            stops[j] = stop_text[j];
        }
        lw_gen_params p = lw_gen_default_params();
        p.stop = stops;
        p.n_stop = 1 + iter % 3;
        char *buf;
        lw_gen *g = make(v, &p, &buf);
        /* the reference: every token's text, then the cut at the earliest stop string */
        run plain;
        lw_gen_params q = lw_gen_default_params();
        char *qbuf;
        lw_gen *h = make(v, &q, &qbuf);
        drive(h, t, 24, 0, 0, NULL, 0, &plain);
        memcpy(full, plain.out, plain.out_len + 1);
        full_len = plain.out_len;
        size_t cut = full_len;
        for (size_t j = 0; j < p.n_stop; j++) {
            const char *f = strstr(full, stops[j]);
            if (f && (size_t)(f - full) < cut) cut = (size_t)(f - full);
        }
        char want[1024];
        memcpy(want, full, cut);
        want[cut] = 0;
        run r;
        drive(g, t, 24, 0, 0, want, 0, &r);
        CHECK_MSG(r.prefix_ok && r.len == cut && !memcmp(r.text, want, cut), "iteration %d: '%s' vs '%s'",
                  iter, r.text, want);
        CHECK((r.stop == LW_STOP_STRING) == (cut < full_len));
        if (cut < full_len) hits++;
        free(buf);
        free(qbuf);
    }
    printf("random stop strings: 3000 runs, %d cut by a stop string\n", hits);
    CHECK(hits > 300 && hits < 2900); /* both kinds are exercised */
}

/* End of generation, n_predict, a full context, lw_gen_stop. */
static void check_stop_rules(const lw_vocab *v) {
    lw_gen_params p = lw_gen_default_params();
    p.decode_last = 1;
    char *buf;
    lw_gen *g = make(v, &p, &buf);
    run r;
    /* EOG (</s> and <|end|>): not decoded even with decode_last; its text is empty without special */
    const int32_t t1[] = {A, 2, B};
    drive(g, t1, 3, 0, 0, NULL, 0, &r);
    CHECK(r.stop == LW_STOP_EOG && r.pushed == 2 && !r.last_decoded && !strcmp(r.text, "a"));
    const int32_t t2[] = {A, END, B};
    drive(g, t2, 3, 0, 0, NULL, 0, &r);
    CHECK(r.stop == LW_STOP_EOG && r.pushed == 2);
    /* with special the EOG's own text comes too (a character it interrupts first, as U+FFFD) */
    p.special = 1;
    free(buf);
    g = make(v, &p, &buf);
    const int32_t t3[] = {A, byte_id(0xC3), END};
    drive(g, t3, 3, 0, 0, NULL, 0, &r);
    CHECK_MSG(r.stop == LW_STOP_EOG && !strcmp(r.text, "a\xef\xbf\xbd<|end|>"), "'%s'", r.text);
    /* ignore_eog goes past it */
    p.special = 0;
    p.ignore_eog = 1;
    p.n_predict = 3;
    free(buf);
    g = make(v, &p, &buf);
    drive(g, t1, 3, 0, 0, NULL, 0, &r);
    CHECK(r.stop == LW_STOP_LENGTH && r.pushed == 3 && !strcmp(r.text, "ab"));
    /* a full context: 4 prompt cells of 6; tokens 1 and 2 are decoded at 4 and 5, the 3rd has no cell */
    p.ignore_eog = 0;
    p.n_predict = -1;
    p.n_ctx = 6;
    free(buf);
    g = make(v, &p, &buf);
    const int32_t t4[] = {A, B, A, B};
    drive(g, t4, 4, 0, 4, NULL, 0, &r);
    CHECK(r.stop == LW_STOP_CONTEXT && r.pushed == 3 && r.decodes == 2 && r.last_pos == 5 && !r.last_decoded);
    /* n_predict ending at the last cell with decode_last: no cell left, so not decoded */
    p.n_predict = 3;
    free(buf);
    g = make(v, &p, &buf);
    drive(g, t4, 4, 0, 4, NULL, 0, &r);
    CHECK(r.stop == LW_STOP_LENGTH && r.pushed == 3 && r.last_pos == 5 && !r.last_decoded);
    drive(g, t4, 4, 0, 3, NULL, 0, &r); /* one cell more: decoded there */
    CHECK(r.stop == LW_STOP_LENGTH && r.pushed == 3 && r.last_pos == 5 && r.last_decoded);
    /* a prompt past the context is refused */
    lw_gen_step st;
    const int32_t big[7] = {1, 1, 1, 1, 1, 1, 1};
    CHECK(lw_gen_start(g, big, 7, 0, &st) == LW_ERR_TOO_LARGE && strstr(lw_gen_error(g), "do not fit"));
    CHECK(lw_gen_start(g, big, 2, 5, &st) == LW_ERR_TOO_LARGE);
    CHECK(lw_gen_start(g, big, 6, 0, &st) == LW_OK); /* exactly full: starts, the first token has no cell */
    CHECK(lw_gen_push(g, A, &st) == LW_OK && st.stop == LW_STOP_CONTEXT);
    /* lw_gen_stop after the 2nd token: CALLBACK, the token decoded at its cell (decode_last) */
    p.n_ctx = 0;
    p.n_predict = -1;
    free(buf);
    g = make(v, &p, &buf);
    drive(g, t4, 4, 0, 2, NULL, 2, &r);
    CHECK(r.stop == LW_STOP_CALLBACK && r.pushed == 2 && r.decodes == 1 && r.last_decoded && r.last_pos == 3);
    /* after an end by n_predict the caller's stop relabels it (the callback ranks before n_predict); after
     * an EOG it does not */
    p.n_predict = 2;
    free(buf);
    g = make(v, &p, &buf);
    drive(g, t4, 4, 0, 2, NULL, 2, &r);
    CHECK(r.stop == LW_STOP_CALLBACK && r.pushed == 2 && r.last_decoded && r.last_pos == 3);
    drive(g, t1, 3, 0, 0, NULL, 2, &r);
    CHECK(r.stop == LW_STOP_EOG);
    free(buf);
}

/* Resuming: a generation ended by n_predict continues with its pending token as the next prompt (as
 * lw_generate's callers do); two machines interleaved step by step give what each gives alone. */
static void check_resume(const lw_vocab *v) {
    const int32_t t[] = {HELLO, WOR, LD, X, SPACE, A, B, AB, X, HELLO};
    lw_gen_params p = lw_gen_default_params();
    char *buf;
    lw_gen *g = make(v, &p, &buf);
    run whole;
    drive(g, t, 10, 0, 3, NULL, 0, &whole);
    /* 4 tokens, then the 4th (pending) as the prompt of 6 more */
    p.n_predict = 4;
    char *buf2;
    lw_gen *h = make(v, &p, &buf2);
    run a;
    drive(h, t, 4, 0, 3, NULL, 0, &a);
    CHECK(a.stop == LW_STOP_LENGTH && a.last_pos == 5);
    lw_gen_step st;
    CHECK(lw_gen_start(h, &t[3], 1, 6, &st) == LW_OK && st.n_ids == 1 && st.pos == 6);
    char text[256];
    size_t len = 0;
    memcpy(text, a.text, a.len), len = a.len;
    for (int i = 4; i < 8; i++) {
        CHECK(lw_gen_push(h, t[i], &st) == LW_OK);
        memcpy(text + len, st.text, st.text_len), len += st.text_len;
    }
    CHECK(st.stop == LW_STOP_LENGTH);
    /* the first 8 tokens' text, the same as one generation's */
    run eight;
    p.n_predict = 8;
    char *buf3;
    lw_gen *k = make(v, &p, &buf3);
    drive(k, t, 8, 0, 3, NULL, 0, &eight);
    CHECK(len == eight.len && !memcmp(text, eight.text, len));
    /* interleaved: g and h each push one token in turn */
    p.n_predict = -1;
    free(buf2);
    h = make(v, &p, &buf2);
    lw_gen_step s1, s2;
    CHECK(lw_gen_start(g, NULL, 0, 0, &s1) == LW_OK && lw_gen_start(h, NULL, 0, 100, &s2) == LW_OK);
    char t1[256], t2[256];
    size_t n1 = 0, n2 = 0;
    for (int i = 0; i < 10; i++) {
        CHECK(lw_gen_push(g, t[i], &s1) == LW_OK && lw_gen_push(h, t[9 - i], &s2) == LW_OK);
        memcpy(t1 + n1, s1.text, s1.text_len), n1 += s1.text_len;
        memcpy(t2 + n2, s2.text, s2.text_len), n2 += s2.text_len;
        CHECK(s1.pos == (uint32_t)i && s2.pos == 100u + (uint32_t)i);
    }
    CHECK(n1 == whole.len && !memcmp(t1, whole.text, n1));
    CHECK(n2 > 0 && memcmp(t1, t2, n1 < n2 ? n1 : n2) != 0);
    free(buf);
    free(buf2);
    free(buf3);
}

/* Errors: NULL arguments, a buffer too small, pushing before a start, ids outside the vocabulary. */
static void check_errors(const lw_vocab *v) {
    lw_gen g;
    lw_gen_params p = lw_gen_default_params();
    char small[8];
    CHECK(lw_gen_init(NULL, v, &p, small, 8) == LW_ERR_INVALID_ARG);
    CHECK(lw_gen_init(&g, v, NULL, small, 8) == LW_ERR_INVALID_ARG && strlen(lw_gen_error(&g)) > 0);
    CHECK(lw_gen_init(&g, v, &p, small, sizeof small) == LW_ERR_TOO_LARGE);
    p.n_stop = 1;
    CHECK(lw_gen_init(&g, v, &p, small, sizeof small) == LW_ERR_INVALID_ARG); /* NULL stop strings */
    p.n_stop = 0;
    lw_gen_step st;
    CHECK(lw_gen_start(&g, NULL, 0, 0, &st) == LW_ERR_INVALID_ARG); /* not set up */
    char *buf;
    lw_gen *h = make(v, &p, &buf);
    CHECK(lw_gen_push(h, A, &st) == LW_ERR_INVALID_ARG);
    CHECK(lw_gen_start(h, NULL, 3, 0, &st) == LW_ERR_INVALID_ARG);
    CHECK(lw_gen_start(h, NULL, 0, 0, &st) == LW_OK);
    CHECK(lw_gen_push(h, N_TOKENS + 5, &st) == LW_OK && st.text_len == 0 && st.sample); /* no text */
    CHECK(lw_gen_push(h, -3, &st) == LW_OK && st.text_len == 0);
    free(buf);
    /* without a vocabulary: ids only, no end of generation */
    size_t need = lw_gen_buffer_size(NULL, &p);
    char nb[64];
    CHECK(need > 0 && need <= sizeof nb && lw_gen_init(&g, NULL, &p, nb, sizeof nb) == LW_OK);
    CHECK(lw_gen_start(&g, NULL, 0, 0, &st) == LW_OK && lw_gen_push(&g, 2, &st) == LW_OK && st.sample &&
          st.text_len == 0);
}

int main(void) {
    char path[1024];
    snprintf(path, sizeof path, "%s/test-gen-vocab.gguf", test_tmp_dir());
    CHECK(write_vocab(path));
    char err[256];
    lw_source *src = NULL;
    lw_gguf *gg = NULL;
    lw_vocab *v = NULL;
    CHECK(lw_source_open_file(path, NULL, &src, err, sizeof err) == LW_OK);
    CHECK(src && lw_gguf_open(src, NULL, &gg) == LW_OK);
    CHECK_MSG(gg && lw_vocab_load(gg, NULL, &v) == LW_OK, "%s", v ? lw_vocab_error(v) : "no vocab");
    if (!v || test_failures) return test_summary("test-gen");
    CHECK(lw_vocab_is_eog(v, 2) && lw_vocab_is_eog(v, END) && !lw_vocab_is_eog(v, A));
    check_steps(v);
    check_utf8(v);
    check_stops(v);
    check_stops_random(v);
    check_stop_rules(v);
    check_resume(v);
    check_errors(v);
    lw_vocab_free(v);
    lw_gguf_close(gg);
    lw_source_close(src);
    return test_summary("test-gen");
}
