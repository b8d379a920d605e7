/* The generation state machine (lw_gen_*, include/llamaweb.h "The generation state machine"): the rules of
 * every generation loop in one place. lw_generate drives it synchronously, chat sessions token by token,
 * and the browser package from JavaScript (web/lw-wasm-gen.c, web/lw-wasm-session.c) with a decode awaited
 * between steps. The machine never decodes or samples: it says what to decode next and turns pushed tokens
 * into text.
 *
 * Stop strings work on bytes. The text handed on is held back while its end could begin a stop string (the
 * longest end of the text that is a proper prefix of one), so nothing handed on is ever taken back; a
 * character split across tokens is held by the detokenizer until it completes. Both keep whole characters:
 * pieces are valid UTF-8 and a stop string's prefix can only match the text's end at a character boundary.
 * Nothing is allocated: the buffers are the caller's (lw_gen_buffer_size). */
#include "core/core.h"

#include <string.h>

/* Machine states (lw_gen.state). */
enum { GEN_IDLE = 0, GEN_WAITING = 1, GEN_OVER = 2 };

lw_gen_params lw_gen_default_params(void) {
    lw_gen_params p;
    memset(&p, 0, sizeof p);
    p.n_predict = -1;
    return p;
}

/* Bytes of stop string i. */
static size_t stop_len(const lw_gen_params *p, size_t i) {
    if (!p->stop[i]) return 0;
    return p->stop_len ? p->stop_len[i] : strlen(p->stop[i]);
}

/* Bytes one push may produce, and the longest stop string; false on overflow. */
static bool gen_sizes(const lw_vocab *v, const lw_gen_params *p, size_t *piece, size_t *held) {
    *piece = 4;
    if (v) {
        lw_detok_stream ds;
        lw_detok_stream_init(&ds, v, p->special, 0);
        *piece = lw_detok_stream_max_out(&ds);
    }
    *held = 0;
    for (size_t i = 0; p->stop && i < p->n_stop; i++) {
        size_t n = stop_len(p, i);
        if (n > *held) *held = n;
    }
    return *piece < SIZE_MAX / 8 && *held < SIZE_MAX / 8;
}

size_t lw_gen_buffer_size(const lw_vocab *v, const lw_gen_params *p) {
    size_t piece, held, n;
    if (!p || !gen_sizes(v, p, &piece, &held)) return 0;
    /* piece + held + text (held + piece) + tail (held + 4, then 4 for the raw rest) */
    if (!lw__mul_size(piece, 2, &n) || !lw__add_size(n, 3 * held + 8, &n)) return 0;
    return n;
}

lw_status lw_gen_init(lw_gen *g, const lw_vocab *v, const lw_gen_params *p, char *buf, size_t cap) {
    if (!g) return LW_ERR_INVALID_ARG;
    memset(g, 0, sizeof *g);
    g->last = -1;
    if (!p || (!buf && cap))
        return lw__errorf(g->err, LW_ERR_INVALID_ARG, "lw_gen_init: NULL params or buffer");
    if (p->n_stop && !p->stop)
        return lw__errorf(g->err, LW_ERR_INVALID_ARG, "lw_gen_init: NULL stop strings");
    size_t need = lw_gen_buffer_size(v, p);
    if (need == 0 || cap < need)
        return lw__errorf(g->err, LW_ERR_TOO_LARGE, "lw_gen_init: a %zu-byte buffer (%zu needed)", cap, need);
    g->p = *p;
    g->v = v;
    gen_sizes(v, p, &g->piece_cap, &g->held_cap);
    g->piece = buf;
    g->held = g->piece + g->piece_cap;
    g->text = g->held + g->held_cap;
    g->tail = g->text + g->held_cap + g->piece_cap;
    return LW_OK;
}

const char *lw_gen_error(const lw_gen *g) {
    return g ? g->err : "NULL machine";
}

/* Where the earliest stop string starts in t[0..n), or n when none occurs. */
static size_t find_stop(const lw_gen *g, const char *t, size_t n) {
    size_t at = n;
    for (size_t i = 0; i < g->p.n_stop; i++) {
        size_t k = stop_len(&g->p, i);
        if (k == 0 || k > n) continue;
        const char *s = g->p.stop[i];
        for (size_t j = 0; j + k <= n && j < at; j++)
            if (t[j] == s[0] && !memcmp(t + j, s, k)) {
                at = j;
                break;
            }
    }
    return at;
}

/* The longest end of t[0..n) that begins a stop string (shorter than it). */
static size_t stop_prefix(const lw_gen *g, const char *t, size_t n) {
    size_t keep = 0;
    for (size_t i = 0; i < g->p.n_stop; i++) {
        size_t k = stop_len(&g->p, i);
        size_t m = k > 0 ? k - 1 : 0; /* a proper prefix */
        if (m > n) m = n;
        for (; m > keep; m--)
            if (!memcmp(t + n - m, g->p.stop[i], m)) {
                keep = m;
                break;
            }
    }
    return keep;
}

/* The held text and in[0..n) through the stop strings into out (room for held + n bytes): *out_n bytes may
 * be handed on; returns 1 when a stop string came (out ends before it; nothing stays held). */
static int through_stops(lw_gen *g, const char *in, size_t n, char *out, size_t *out_n) {
    size_t t = g->n_held;
    if (t) memcpy(out, g->held, t);
    if (n) memcpy(out + t, in, n);
    t += n;
    size_t at = find_stop(g, out, t);
    if (at < t) {
        g->n_held = 0;
        *out_n = at;
        return 1;
    }
    size_t keep = stop_prefix(g, out, t);
    if (keep) memcpy(g->held, out + t - keep, keep);
    g->n_held = keep;
    *out_n = t - keep;
    return 0;
}

/* The step that ends the generation with reason stop after token g->last (its text already in *step):
 * the character left incomplete and the held text go to tail (a stop string there ends it as LW_STOP_STRING);
 * with decode_last the last token is decoded when a cell is left for it. */
static void finish(lw_gen *g, lw_stop_reason stop, lw_gen_step *step) {
    const lw_stop_reason why = stop; /* what ended it decides the last token's decode */
    size_t rest = 0;
    char raw[4];
    if (g->v && lw_detok_stream_flush(&g->ds, raw, sizeof raw, &rest) != LW_OK) rest = 0;
    char *keep = g->tail + g->held_cap + 4; /* the raw bytes, past where tail's text may reach */
    memcpy(keep, raw, rest);
    step->rest = keep;
    step->rest_len = rest;
    size_t n = 0;
    if (stop == LW_STOP_STRING) {
        g->n_held = 0; /* the text ended before the stop string: nothing more is handed on */
    } else {
        /* tail = held + rest; a stop string may complete in it */
        if (through_stops(g, raw, rest, g->tail, &n)) {
            if (stop != LW_STOP_EOG) stop = LW_STOP_STRING; /* the end-of-generation token still ends it */
        } else {
            memcpy(g->tail + n, g->held, g->n_held);
            n += g->n_held;
            g->n_held = 0;
        }
    }
    step->tail = g->tail;
    step->tail_len = n;
    step->ids = &g->last;
    step->n_ids = 0;
    step->pos = g->pos;
    step->sample = 0;
    step->stop = stop;
    int decode = g->p.decode_last && g->last >= 0 && why != LW_STOP_EOG && why != LW_STOP_CONTEXT;
    if (decode && (g->p.n_ctx == 0 || g->pos < g->p.n_ctx)) {
        step->n_ids = 1;
        g->pos++;
    }
    g->state = GEN_OVER;
    g->final = *step;
}

/* A step with nothing to hand on yet. */
static void empty_step(const lw_gen *g, lw_gen_step *step) {
    memset(step, 0, sizeof *step);
    step->token = g->last;
    step->n_generated = g->n_generated;
    step->piece = step->text = step->tail = step->rest = "";
}

lw_status lw_gen_start(lw_gen *g, const int32_t *prompt, size_t n_prompt, uint32_t pos, lw_gen_step *step) {
    if (!g || !step) return LW_ERR_INVALID_ARG;
    if (!g->piece) return lw__errorf(g->err, LW_ERR_INVALID_ARG, "lw_gen_start: the machine was not set up");
    if (!prompt && n_prompt) return lw__errorf(g->err, LW_ERR_INVALID_ARG, "lw_gen_start: NULL prompt");
    uint64_t end = (uint64_t)pos + n_prompt;
    if (end > UINT32_MAX || (g->p.n_ctx && end > g->p.n_ctx))
        return lw__errorf(g->err, LW_ERR_TOO_LARGE, "%zu tokens do not fit the context (%u of %u cells used)",
                          n_prompt, pos, g->p.n_ctx);
    g->n_generated = 0;
    g->last = -1;
    g->n_held = 0;
    g->err[0] = 0;
    if (g->v) lw_detok_stream_init(&g->ds, g->v, g->p.special, 0);
    empty_step(g, step);
    step->ids = prompt;
    step->n_ids = n_prompt;
    step->pos = pos;
    g->pos = (uint32_t)end;
    if (g->p.n_predict == 0) {
        g->state = GEN_OVER;
        step->stop = LW_STOP_LENGTH;
        g->final = *step;
        g->final.n_ids = 0; /* handed out again by lw_gen_stop: the prompt is decoded once */
        return LW_OK;
    }
    step->sample = 1;
    g->state = GEN_WAITING;
    return LW_OK;
}

lw_status lw_gen_push(lw_gen *g, int32_t id, lw_gen_step *step) {
    if (!g || !step) return LW_ERR_INVALID_ARG;
    if (g->state != GEN_WAITING)
        return lw__errorf(g->err, LW_ERR_INVALID_ARG, "lw_gen_push: no generation waits for a token");
    g->n_generated++;
    g->last = id;
    empty_step(g, step);
    size_t n = 0;
    if (g->v && lw_detok_stream_push(&g->ds, id, g->piece, g->piece_cap, &n) != LW_OK)
        n = 0; /* past the vocab */
    step->piece = g->piece;
    step->piece_len = n;
    int hit = through_stops(g, g->piece, n, g->text, &step->text_len);
    step->text = g->text;
    lw_stop_reason stop = LW_STOP_NONE;
    if (!g->p.ignore_eog && g->v && lw_vocab_is_eog(g->v, id))
        stop = LW_STOP_EOG;
    else if (hit)
        stop = LW_STOP_STRING;
    else if (g->p.n_predict >= 0 && g->n_generated >= g->p.n_predict)
        stop = LW_STOP_LENGTH;
    else if (g->p.n_ctx && g->pos >= g->p.n_ctx)
        stop = LW_STOP_CONTEXT; /* no cell for this token */
    if (stop != LW_STOP_NONE) {
        finish(g, stop, step);
        return LW_OK;
    }
    /* go on: decode the token, then sample the next */
    step->ids = &g->last;
    step->n_ids = 1;
    step->pos = g->pos++;
    step->sample = 1;
    return LW_OK;
}

lw_status lw_gen_stop(lw_gen *g, lw_stop_reason why, lw_gen_step *step) {
    if (!g || !step) return LW_ERR_INVALID_ARG;
    if (g->state == GEN_OVER) {
        if (g->final.stop == LW_STOP_LENGTH || g->final.stop == LW_STOP_CONTEXT) g->final.stop = why;
        *step = g->final;
        step->text = "", step->text_len = 0; /* handed on with the push already */
        return LW_OK;
    }
    if (g->state != GEN_WAITING) return lw__errorf(g->err, LW_ERR_INVALID_ARG, "lw_gen_stop: no generation");
    empty_step(g, step);
    if (g->last >= 0) g->pos--; /* the last push's decode is taken back (finish asks again if it keeps it) */
    finish(g, why, step);
    return LW_OK;
}
