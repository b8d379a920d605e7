/* The generation state machine for the browser package (web/llamaweb.mjs Model.generate): the rules of a
 * generation (lw_gen_*, src/model/gen.c: stop strings, n_predict, end of generation, a full context) in C,
 * driven from JavaScript, which decodes on the engine (the GPU model or the wasm CPU engine) what each step
 * asks, awaits it, samples, and pushes the token back.
 *
 * Each call leaves its results in a small int32 array (lw_wasm_gen_out, slots LW_WG_*) that JS reads from
 * the heap, so a token costs one call and no allocation on either side. Compiled only by the wasm build; the
 * model is any lw_model with (or without) a vocabulary: the CPU engine's or a GPU model's header-only one,
 * which must outlive the machine. */
#include "core/core.h"

#include <emscripten/emscripten.h>
#include <stdlib.h>
#include <string.h>

/* Result slots of lw_wasm_gen_out (int32 each; pointers are wasm32 addresses). web/llamaweb.mjs reads them
 * by these numbers: keep the two in step. */
enum {
    LW_WG_STATUS = 0,    /* lw_status of the last call                                          */
    LW_WG_N_IDS = 1,     /* ids to decode now (0: none)                                          */
    LW_WG_POS = 2,       /* the cell they go to                                                  */
    LW_WG_SAMPLE = 3,    /* 1: then sample and push; 0: the generation is over                   */
    LW_WG_STOP = 4,      /* lw_stop_reason (LW_STOP_NONE while it goes on)                       */
    LW_WG_TOKEN = 5,     /* the token pushed last (-1: none)                                     */
    LW_WG_N_GEN = 6,     /* tokens pushed                                                        */
    LW_WG_TEXT = 7,      /* address of the text to hand on for the token                         */
    LW_WG_TEXT_LEN = 8,  /* its bytes                                                            */
    LW_WG_TAIL = 9,      /* at the end: address of the text held back, handed on after (id -1)   */
    LW_WG_TAIL_LEN = 10, /* its bytes                                                            */
    LW_WG_COUNT
};

/* A machine with its buffers and its copies of the stop strings. */
typedef struct lw_wasm_gen {
    lw_gen g;                 /* the machine                                      */
    char *buf;                /* its buffer                                       */
    char *stops;              /* the stop strings' bytes, one after the other      */
    const char **stop;        /* each string's start in stops                     */
    size_t *stop_len;         /* each string's bytes                              */
    int32_t out[LW_WG_COUNT]; /* results of the last call, read by JS             */
} lw_wasm_gen;

/* Stores step and st into the result slots; returns st. */
static int note(lw_wasm_gen *w, lw_status st, const lw_gen_step *s) {
    w->out[LW_WG_STATUS] = (int32_t)st;
    if (st != LW_OK) return (int)st;
    w->out[LW_WG_N_IDS] = (int32_t)s->n_ids; /* at most the prompt JS passed (an int) */
    w->out[LW_WG_POS] = (int32_t)s->pos;
    w->out[LW_WG_SAMPLE] = s->sample;
    w->out[LW_WG_STOP] = (int32_t)s->stop;
    w->out[LW_WG_TOKEN] = s->token;
    w->out[LW_WG_N_GEN] = s->n_generated;
    w->out[LW_WG_TEXT] = (int32_t)(uintptr_t)s->text;
    w->out[LW_WG_TEXT_LEN] = (int32_t)s->text_len; /* one token's text and a stop string's length */
    w->out[LW_WG_TAIL] = (int32_t)(uintptr_t)s->tail;
    w->out[LW_WG_TAIL_LEN] = (int32_t)s->tail_len;
    return (int)st;
}

EMSCRIPTEN_KEEPALIVE void lw_wasm_gen_free(lw_wasm_gen *w) {
    if (!w) return;
    free(w->buf);
    free(w->stops);
    free(w->stop);
    free(w->stop_len);
    free(w);
}

/* A machine for model m's vocabulary (none: ids only): n_predict (< 0: no limit), n_ctx cells (0: no limit),
 * special (control tokens' text), decode_last (lw_gen_params), and n_stop stop strings: their bytes one after
 * the other at stops, stop_lens[i] bytes each. Returns NULL only when memory runs out; otherwise check
 * lw_wasm_gen_out()[LW_WG_STATUS] (0: fine) with lw_wasm_gen_error(), and free it either way. */
EMSCRIPTEN_KEEPALIVE lw_wasm_gen *lw_wasm_gen_new(const lw_model *m, int n_predict, int n_ctx, int special,
                                                  int decode_last, const char *stops,
                                                  const int32_t *stop_lens, int n_stop) {
    lw_wasm_gen *w = calloc(1, sizeof *w);
    if (!w) return NULL;
    if (n_ctx < 0 || n_stop < 0 || (n_stop && (!stops || !stop_lens))) {
        w->out[LW_WG_STATUS] = lw__errorf(w->g.err, LW_ERR_INVALID_ARG, "lw_wasm_gen_new: bad arguments");
        return w;
    }
    size_t total = 0;
    for (int i = 0; i < n_stop; i++) {
        if (stop_lens[i] < 0 || !lw__add_size(total, (size_t)stop_lens[i], &total)) {
            w->out[LW_WG_STATUS] =
                lw__errorf(w->g.err, LW_ERR_INVALID_ARG, "lw_wasm_gen_new: bad stop lengths");
            return w;
        }
    }
    const size_t k = n_stop ? (size_t)n_stop : 1;
    w->stops = malloc(total ? total : 1);
    w->stop = calloc(k, sizeof *w->stop);
    w->stop_len = calloc(k, sizeof *w->stop_len);
    if (!w->stops || !w->stop || !w->stop_len) {
        lw_wasm_gen_free(w);
        return NULL;
    }
    if (total) memcpy(w->stops, stops, total);
    for (size_t i = 0, at = 0; i < (size_t)n_stop; at += w->stop_len[i++]) {
        w->stop[i] = w->stops + at;
        w->stop_len[i] = (size_t)stop_lens[i];
    }
    lw_gen_params p = lw_gen_default_params();
    p.n_predict = n_predict;
    p.n_ctx = (uint32_t)n_ctx;
    p.special = special != 0;
    p.decode_last = decode_last != 0;
    p.stop = w->stop;
    p.stop_len = w->stop_len;
    p.n_stop = (size_t)n_stop;
    const lw_vocab *v = m ? lw_model_vocab(m) : NULL;
    size_t need = lw_gen_buffer_size(v, &p);
    if (need == 0) {
        w->out[LW_WG_STATUS] = lw__errorf(w->g.err, LW_ERR_TOO_LARGE, "stop strings too long");
        return w;
    }
    if (!(w->buf = malloc(need))) {
        lw_wasm_gen_free(w);
        return NULL;
    }
    w->out[LW_WG_STATUS] = (int32_t)lw_gen_init(&w->g, v, &p, w->buf, need);
    return w;
}

/* The result slots (LW_WG_COUNT int32 values). */
EMSCRIPTEN_KEEPALIVE int32_t *lw_wasm_gen_out(lw_wasm_gen *w) {
    return w->out;
}

/* Message of the last failed call ("" when none). */
EMSCRIPTEN_KEEPALIVE const char *lw_wasm_gen_error(const lw_wasm_gen *w) {
    return lw_gen_error(&w->g);
}

/* Starts a generation of the n prompt ids at ids going to cells from pos (lw_gen_start). */
EMSCRIPTEN_KEEPALIVE int lw_wasm_gen_start(lw_wasm_gen *w, const int32_t *ids, int n, int pos) {
    lw_gen_step s;
    if (n < 0 || pos < 0)
        return note(w, lw__errorf(w->g.err, LW_ERR_INVALID_ARG, "lw_wasm_gen_start: bad arguments"), NULL);
    return note(w, lw_gen_start(&w->g, ids, (size_t)n, (uint32_t)pos, &s), &s);
}

/* Pushes the token sampled after the last step's decode (lw_gen_push). */
EMSCRIPTEN_KEEPALIVE int lw_wasm_gen_push(lw_wasm_gen *w, int id) {
    lw_gen_step s;
    return note(w, lw_gen_push(&w->g, id, &s), &s);
}

/* Ends the generation by the caller's choice (lw_gen_stop; why: an lw_stop_reason, LW_STOP_CALLBACK for a
 * stop or an abort). */
EMSCRIPTEN_KEEPALIVE int lw_wasm_gen_stop(lw_wasm_gen *w, int why) {
    lw_gen_step s;
    return note(w, lw_gen_stop(&w->g, (lw_stop_reason)why, &s), &s);
}
