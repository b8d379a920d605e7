/* Writing synthetic models: vocabulary, metadata, seeded random rows quantized on the fly (see synth.h). */
#include "synth/synth.h"

#include "cpu/engine-threads.h"
#include "quant/quant-iq.h"
#include "quant/quant.h"

#include <inttypes.h>
#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

/* ---------------------------------------------------------------------------------------------------------
 * Random numbers: splitmix64 turns (seed, tensor, row) into a state, xorshift64* draws from it. Every row has
 * its own stream, so any chunking of a tensor by the writer gives the same bytes, and a tensor's values do
 * not depend on its type (an f32 file and a q4_k_m file made with one seed hold the same underlying floats).
 * ------------------------------------------------------------------------------------------------------- */

static uint64_t splitmix64(uint64_t x) {
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

static uint64_t xorshift64s(uint64_t *s) {
    uint64_t x = *s;
    x ^= x >> 12, x ^= x << 25, x ^= x >> 27;
    *s = x;
    return x * 0x2545F4914F6CDD1Dull;
}

/* A bounded normal-ish draw with mean 0 and variance 1: the sum of four uniform 16-bit numbers
 * (Irwin-Hall, |z| <= sqrt(12)), one 64-bit draw per value. */
static float draw_z(uint64_t *s) {
    const uint64_t r = xorshift64s(s);
    const int32_t sum = (int32_t)(r & 0xffff) + (int32_t)((r >> 16) & 0xffff) +
                        (int32_t)((r >> 32) & 0xffff) + (int32_t)(r >> 48);
    return (float)(sum - 131070) * (1.7320508f / 65536.f);
}

/* Seed of a tensor: from the file seed and the tensor's name (FNV-1a). */
static uint64_t tensor_seed(uint64_t seed, const char *name) {
    uint64_t h = 0xcbf29ce484222325ull;
    for (const char *c = name; *c; c++) h = (h ^ (uint8_t)*c) * 0x100000001b3ull;
    return splitmix64(seed ^ splitmix64(h));
}

static uint64_t row_state(uint64_t tseed, int64_t row) {
    uint64_t s = splitmix64(tseed + (uint64_t)row * 0xD1B54A32D192ED03ull);
    return s ? s : 1;
}

/* ---------------------------------------------------------------------------------------------------------
 * Rows
 * ------------------------------------------------------------------------------------------------------- */

#define BATCH_ELEMS (256 * 1024) /* floats generated per batch and thread: 1 MB of scratch per thread */

typedef struct synth_ctx synth_ctx;

/* One tensor being written: what the fill callback needs. */
typedef struct job {
    synth_ctx *ctx;     /* shared scratch                                             */
    lw__synth_tensor t; /* name, shape, kind, type                                    */
    uint64_t tseed;     /* tensor_seed                                                */
    size_t row_bytes;   /* bytes of one row in t.type                                 */
    int64_t batch_rows; /* rows produced per batch (BATCH_ELEMS per thread)           */
    int random_blocks;  /* 1: IQ type without a quantizer here: random valid blocks   */
    float amax;         /* random blocks: bound on |value| giving standard dev. scale */
    float scale;        /* standard deviation of a matrix's values                    */
} job;

/* Shared by all jobs: the writer produces one tensor at a time. */
struct synth_ctx {
    const lw__synth_preset *p; /* the preset, for rope factors                     */
    float *f;                  /* float rows of the current batch                  */
    uint8_t *q;                /* the batch in the tensor's type                   */
    const job *cur;            /* whose rows q holds (NULL: none)                  */
    int64_t r0, r1;            /* rows [r0, r1) are in q                           */
    char *err;                 /* message buffer (LW_ERRMSG_SIZE)                  */
    lw__pool *pool;            /* threads that split each batch's rows             */
    /* the batch being produced (read by every thread of the pool's run) */
    const job *pjob; /* its tensor                                             */
    int64_t prow;    /* first row                                              */
    int64_t pend;    /* one past the last                                      */
    atomic_int prc;  /* LW_OK, or the first thread's failure                   */
};

/* llama3 rope factors as convert_hf_to_gguf.py's LlamaModel.generate_extra_tensors computes them (float32).
 */
static void rope_freqs_llama3(const lw__synth_preset *p, float *out, int64_t n) {
    const float dim = (float)lw__synth_head_dim(p), base = p->rope_base, factor = p->llama3_factor;
    const float lo = p->llama3_low, hi = p->llama3_high, old = (float)p->llama3_orig_ctx;
    const float low_wavelen = old / lo, high_wavelen = old / hi;
    for (int64_t i = 0; i < n; i++) {
        const float freq = 1.0f / powf(base, (float)(2 * i) / dim);
        const float wavelen = 2.0f * 3.14159265358979f / freq;
        if (wavelen < high_wavelen)
            out[i] = 1.0f;
        else if (wavelen > low_wavelen)
            out[i] = factor;
        else {
            const float smooth = (old / wavelen - lo) / (hi - lo);
            out[i] = 1.0f / ((1.0f - smooth) / factor + smooth);
        }
    }
}

/* The float values of one row. */
static void gen_row(const job *jb, int64_t row, float *dst) {
    const int64_t n = jb->t.ne[0];
    uint64_t s = row_state(jb->tseed, row);
    switch (jb->t.kind) {
    case LW_SYNTH_MATRIX:
        for (int64_t i = 0; i < n; i++) dst[i] = jb->scale * draw_z(&s);
        break;
    case LW_SYNTH_NORM:
        for (int64_t i = 0; i < n; i++) dst[i] = 1.0f + 0.05f * draw_z(&s);
        break;
    case LW_SYNTH_BIAS:
        for (int64_t i = 0; i < n; i++) dst[i] = 0.02f * draw_z(&s);
        break;
    case LW_SYNTH_ROPE_FREQS:
        rope_freqs_llama3(jb->ctx->p, dst, n);
        break;
    case LW_SYNTH_ROPE_PROP: { /* Gemma4Model.generate_extra_tensors: rotated pairs first, the rest held */
        const int64_t rot = (int64_t)((float)jb->ctx->p->head_dim * jb->ctx->p->rope_partial / 2.0f);
        for (int64_t i = 0; i < n; i++) dst[i] = i < rot ? 1.0f : 1e30f;
        break;
    }
    }
}

/* Rows [r0, r1) of the batch at c->prow in jb's type, at their place in the scratch. Returns LW_OK or why
 * not (one thread's part of produce). */
static lw_status produce_rows(const job *jb, int64_t r0, int64_t r1) {
    synth_ctx *c = jb->ctx;
    const int64_t ne0 = jb->t.ne[0];
    uint8_t *q = c->q + (size_t)(r0 - c->prow) * jb->row_bytes;
    if (jb->random_blocks) {
        const lw_type_info *ti = lw_type_get(jb->t.type);
        const int64_t nb = ne0 / ti->block_size;
        for (int64_t r = r0; r < r1; r++, q += jb->row_bytes) {
            uint64_t s = row_state(jb->tseed, r);
            for (int64_t b = 0; b < nb; b++) {
                lw_status rc = lw__iq_random_block(jb->t.type, &s, jb->amax, q + (size_t)b * ti->type_size);
                if (rc != LW_OK) return rc;
            }
        }
        return LW_OK;
    }
    float *f = c->f + (size_t)(r0 - c->prow) * (size_t)ne0;
    for (int64_t r = r0; r < r1; r++) gen_row(jb, r, f + (size_t)(r - r0) * (size_t)ne0);
    return lw__quantize(jb->t.type, f, q, r1 - r0, ne0, NULL);
}

/* lw__pool_fn: thread ith of nth takes the ith contiguous share of the batch's rows. */
static void produce_share(void *arg, int ith, int nth) {
    synth_ctx *c = arg;
    const int64_t n = c->pend - c->prow;
    const int64_t r0 = c->prow + n * ith / nth, r1 = c->prow + n * (ith + 1) / nth;
    if (r0 == r1) return;
    const lw_status rc = produce_rows(c->pjob, r0, r1);
    int expected = LW_OK;
    if (rc != LW_OK) atomic_compare_exchange_strong(&c->prc, &expected, (int)rc);
}

/* Fills the scratch with rows [row, row + batch) of jb in its type, the rows split over the pool. */
static lw_status produce(const job *jb, int64_t row) {
    synth_ctx *c = jb->ctx;
    const int64_t nrows = lw__synth_rows(&jb->t);
    c->cur = NULL;
    c->pjob = jb;
    c->prow = row;
    c->pend = row + jb->batch_rows < nrows ? row + jb->batch_rows : nrows;
    atomic_store(&c->prc, LW_OK);
    lw__pool_run(c->pool, produce_share, c);
    const lw_status rc = (lw_status)atomic_load(&c->prc);
    if (rc != LW_OK) {
        const char *tn = lw_type_get(jb->t.type)->name;
        if (jb->random_blocks) return lw__errorf(c->err, rc, "%s: random %s block failed", jb->t.name, tn);
        return lw__errorf(c->err, rc, "%s: quantizing to %s failed (%s)", jb->t.name, tn, lw_status_str(rc));
    }
    c->cur = jb, c->r0 = row, c->r1 = c->pend;
    return LW_OK;
}

/* lw_tensor_fill_fn: bytes [off, off + n) of the tensor, from cached batches of whole rows. */
static lw_status fill(void *user, uint64_t off, void *dst, size_t n) {
    const job *jb = user;
    synth_ctx *c = jb->ctx;
    uint8_t *out = dst;
    while (n > 0) {
        const int64_t row = (int64_t)(off / jb->row_bytes);
        if (c->cur != jb || row < c->r0 || row >= c->r1) {
            lw_status rc = produce(jb, row);
            if (rc != LW_OK) return rc;
        }
        const uint64_t in = off - (uint64_t)c->r0 * jb->row_bytes;
        const uint64_t avail = (uint64_t)(c->r1 - c->r0) * jb->row_bytes - in;
        const size_t k = avail < n ? (size_t)avail : n;
        memcpy(out, c->q + in, k);
        out += k, off += k, n -= k;
    }
    return LW_OK;
}

/* ---------------------------------------------------------------------------------------------------------
 * Vocabulary
 * ------------------------------------------------------------------------------------------------------- */

/* A byte-level SentencePiece vocabulary: <unk>, <s>, </s>, then <0x00>..<0xFF> (every text tokenizes through
 * byte fallback), as llama.cpp's SPM loader expects (token types: 2 unknown, 3 control, 6 byte); n > 259 pads
 * it with normal tokens "[i]" that no text reaches (pieces of them are not in the vocabulary), so a model can
 * have a real model's vocabulary size (128256 for Llama 3) without a vocab file. */
static lw_status builtin_vocab(lw_gguf_writer *w, int64_t n, const lw_allocator *al, char *err) {
    enum { N_BASE = 259, TEXT = 16 };
    static const char hex[] = "0123456789ABCDEF";
    if (n < N_BASE || n > LW_SYNTH_MAX_VOCAB)
        return lw__errorf(err, LW_ERR_INVALID_ARG, "built-in vocab size %" PRId64 " outside %d..%d", n,
                          N_BASE, LW_SYNTH_MAX_VOCAB);
    char *text = lw__calloc(al, (size_t)n, TEXT);
    lw_gguf_str *toks = lw__calloc(al, (size_t)n, sizeof *toks);
    float *scores = lw__calloc(al, (size_t)n, sizeof *scores);
    int32_t *types = lw__calloc(al, (size_t)n, sizeof *types);
    lw_status rc = LW_OK;
    if (!text || !toks || !scores || !types) {
        rc = lw__errorf(err, LW_ERR_NOMEM, "out of memory for a %" PRId64 "-token vocab", n);
        goto done;
    }
    for (int64_t i = 0; i < n; i++) {
        char *t = text + (size_t)i * TEXT;
        if (i == 0)
            strcpy(t, "<unk>");
        else if (i == 1)
            strcpy(t, "<s>");
        else if (i == 2)
            strcpy(t, "</s>");
        else if (i < N_BASE)
            snprintf(t, TEXT, "<0x%c%c>", hex[(i - 3) >> 4], hex[(i - 3) & 15]);
        else
            snprintf(t, TEXT, "[%" PRId64 "]", i);
        toks[i].s = t, toks[i].len = strlen(t);
        types[i] = i == 0 ? 2 : i < 3 ? 3 : i < N_BASE ? 6 : 1;
    }
    if ((rc = lw_gguf_writer_set_str(w, "tokenizer.ggml.model", "llama")) != LW_OK ||
        (rc = lw_gguf_writer_set_arr(w, "tokenizer.ggml.tokens", LW_GGUF_STRING, (uint64_t)n, toks)) !=
            LW_OK ||
        (rc = lw_gguf_writer_set_arr(w, "tokenizer.ggml.scores", LW_GGUF_FLOAT32, (uint64_t)n, scores)) !=
            LW_OK ||
        (rc = lw_gguf_writer_set_arr(w, "tokenizer.ggml.token_type", LW_GGUF_INT32, (uint64_t)n, types)) !=
            LW_OK ||
        (rc = lw_gguf_writer_set_u32(w, "tokenizer.ggml.unknown_token_id", 0)) != LW_OK ||
        (rc = lw_gguf_writer_set_u32(w, "tokenizer.ggml.bos_token_id", 1)) != LW_OK ||
        (rc = lw_gguf_writer_set_u32(w, "tokenizer.ggml.eos_token_id", 2)) != LW_OK ||
        (rc = lw_gguf_writer_set_bool(w, "tokenizer.ggml.add_bos_token", 1)) != LW_OK)
        lw__errorf(err, rc, "vocab: %s", lw_gguf_writer_error(w));
done:
    lw__free(al, text);
    lw__free(al, toks);
    lw__free(al, scores);
    lw__free(al, types);
    return rc;
}

/* Copies every tokenizer.* key of the vocab GGUF at path (but its chat template when skip_template); the
 * token count is the vocabulary size. */
static lw_status copy_vocab(lw_gguf_writer *w, const char *path, const lw_allocator *alloc, int64_t *n_vocab,
                            int skip_template, char *err) {
    lw_source *src = NULL;
    lw_gguf *g = NULL;
    char why[LW_ERRMSG_SIZE];
    lw_status rc = lw_source_open_file(path, alloc, &src, why, sizeof why);
    if (rc != LW_OK) return lw__errorf(err, rc, "vocab %s: %s", path, why);
    if ((rc = lw_gguf_open(src, alloc, &g)) != LW_OK) {
        lw__errorf(err, rc, "vocab %s: %s", path, g ? lw_gguf_error(g) : lw_status_str(rc));
        goto done;
    }
    lw_gguf_type et;
    uint64_t n;
    const void *data;
    if ((rc = lw_gguf_get_arr(g, "tokenizer.ggml.tokens", &et, &n, &data)) != LW_OK || et != LW_GGUF_STRING ||
        n == 0 || n > INT32_MAX) {
        rc = rc != LW_OK ? rc : LW_ERR_TYPE_MISMATCH;
        lw__errorf(err, rc, "vocab %s: no usable tokenizer.ggml.tokens array", path);
        goto done;
    }
    *n_vocab = (int64_t)n;
    for (int64_t i = 0; i < lw_gguf_n_kv(g); i++) {
        const char *key = lw_gguf_key(g, i);
        if (strncmp(key, "tokenizer.", 10)) continue;
        if (skip_template && !strcmp(key, "tokenizer.chat_template")) continue;
        if ((rc = lw_gguf_writer_set(w, key, lw_gguf_value_at(g, i))) != LW_OK) {
            lw__errorf(err, rc, "vocab key %s: %s", key, lw_gguf_writer_error(w));
            goto done;
        }
    }
done:
    lw_gguf_close(g);
    lw_source_close(src);
    return rc;
}

/* ---------------------------------------------------------------------------------------------------------
 * Metadata
 * ------------------------------------------------------------------------------------------------------- */

/* gemma4's own keys as convert_hf_to_gguf.py's Gemma4Model writes them: the sliding blocks' head size and
 * RoPE dimensions, one sliding flag per block, the shared-KV count, the per-layer input width, and the FFN
 * widths and KV head counts as one value or (double-wide FFNs, other global KV heads) one per block. */
static lw_status set_gemma4_keys(lw_gguf_writer *w, const lw__synth_preset *p, uint32_t n_layer) {
    char k[96];
    lw_status rc = LW_OK;
    const uint32_t shared = lw__synth_kv_shared(p, n_layer), n_kv = n_layer - shared;
    uint32_t ff[512], kvh[512];
    uint8_t swa[512];
    if (n_layer > 512) return LW_ERR_INVALID_ARG;
    for (uint32_t il = 0; il < n_layer; il++) {
        swa[il] = (uint8_t)lw__synth_is_swa(p, il);
        ff[il] = p->double_wide_mlp && il >= n_kv ? 2 * p->n_ff : p->n_ff;
        kvh[il] = swa[il] || !p->n_head_kv_global ? p->n_head_kv : p->n_head_kv_global;
    }
#define U32(name, v)                                                                                         \
    if (rc == LW_OK) snprintf(k, sizeof k, "gemma4." name), rc = lw_gguf_writer_set_u32(w, k, (v))
#define ARR(name, t, data)                                                                                   \
    if (rc == LW_OK)                                                                                         \
    snprintf(k, sizeof k, "gemma4." name), rc = lw_gguf_writer_set_arr(w, k, t, n_layer, data)
    if (shared && p->double_wide_mlp) {
        ARR("feed_forward_length", LW_GGUF_UINT32, ff);
    } else {
        U32("feed_forward_length", p->n_ff);
    }
    if (p->n_head_kv_global && p->n_head_kv_global != p->n_head_kv) {
        ARR("attention.head_count_kv", LW_GGUF_UINT32, kvh);
    } else {
        U32("attention.head_count_kv", p->n_head_kv);
    }
    U32("attention.key_length_swa", p->head_dim_swa);
    U32("attention.value_length_swa", p->head_dim_swa);
    U32("rope.dimension_count", p->head_dim); /* proportional RoPE: the whole head, factors hold the rest */
    U32("rope.dimension_count_swa", p->head_dim_swa);
    ARR("attention.sliding_window_pattern", LW_GGUF_BOOL, swa);
    U32("attention.shared_kv_layers", shared);
    U32("embedding_length_per_layer_input", p->n_embd_per_layer);
#undef U32
#undef ARR
    return rc;
}

static lw_status set_arch_keys(lw_gguf_writer *w, const lw__synth_preset *p, uint32_t n_layer,
                               int64_t n_vocab) {
    char k[96];
    lw_status rc = LW_OK;
#define U32(name, v)                                                                                         \
    if (rc == LW_OK) snprintf(k, sizeof k, "%s." name, p->arch), rc = lw_gguf_writer_set_u32(w, k, (v))
#define F32(name, v)                                                                                         \
    if (rc == LW_OK) snprintf(k, sizeof k, "%s." name, p->arch), rc = lw_gguf_writer_set_f32(w, k, (v))
    const int gemma4 = !strcmp(p->arch, "gemma4");
    U32("context_length", p->n_ctx_train);
    U32("embedding_length", p->n_embd);
    U32("block_count", n_layer);
    if (!gemma4) U32("feed_forward_length", p->n_ff);
    U32("attention.head_count", p->n_head);
    if (!gemma4) U32("attention.head_count_kv", p->n_head_kv);
    F32("attention.layer_norm_rms_epsilon", p->rms_eps);
    F32("rope.freq_base", p->rope_base);
    if (!strcmp(p->arch, "llama")) {
        U32("vocab_size", (uint32_t)n_vocab);
    }
    if (!strcmp(p->arch, "llama") || !strcmp(p->arch, "phi3")) {
        U32("rope.dimension_count", lw__synth_head_dim(p));
    }
    if (p->head_dim) {
        U32("attention.key_length", p->head_dim);
        U32("attention.value_length", p->head_dim);
    }
    if (p->sliding_window) {
        U32("attention.sliding_window", p->sliding_window);
    }
    if (p->rope_base_swa > 0.f) {
        F32("rope.freq_base_swa", p->rope_base_swa);
    }
    if (p->attn_softcap > 0.f) {
        F32("attn_logit_softcapping", p->attn_softcap);
    }
    if (p->final_softcap > 0.f) {
        F32("final_logit_softcapping", p->final_softcap);
    }
    if (p->n_expert) { /* convert_hf_to_gguf.py's Qwen3MoeModel, Gemma4Model */
        U32("expert_count", p->n_expert);
        U32("expert_used_count", p->n_expert_used);
        U32("expert_feed_forward_length", p->n_ff_exp);
    }
    if (gemma4 && rc == LW_OK) rc = set_gemma4_keys(w, p, n_layer);
#undef U32
#undef F32
    return rc;
}

/* Standard deviation of the values of random valid blocks of an IQ type per unit of their bound amax: each
 * format's grids spread differently, so the bound is set from this to give matrices their intended scale.
 * Measured on 64 blocks from a fixed seed (deterministic); 0 when it cannot be measured. */
static float iq_sd_per_amax(uint32_t type, const lw_allocator *al) {
    enum { NB = 64 };
    const lw_type_info *ti = lw_type_get(type);
    if (!ti || ti->block_size == 0) return 0.f;
    void *b = lw__malloc(al, (size_t)NB * ti->type_size);
    float *y = lw__malloc(al, sizeof(float) * NB * ti->block_size);
    float sd = 0.f;
    if (b && y) {
        lw__iq_random_blocks(type, b, NB, 0x5eedull);
        if (lw__dequantize(type, b, y, (int64_t)NB * ti->block_size) == LW_OK) {
            double s = 0, q = 0;
            const size_t n = (size_t)NB * ti->block_size;
            for (size_t i = 0; i < n; i++) s += y[i], q += (double)y[i] * y[i];
            const double m = s / (double)n, v = q / (double)n - m * m;
            sd = v > 0 ? (float)sqrt(v) : 0.f;
        }
    }
    lw__free(al, b);
    lw__free(al, y);
    return sd;
}

/* ---------------------------------------------------------------------------------------------------------
 * The whole file
 * ------------------------------------------------------------------------------------------------------- */

/* A shape the writer can make and llama.cpp's loaders accept: known architecture, positive sizes within
 * limits that keep every product far from overflow, whole GQA groups, an even head size (RoPE pairs),
 * experts for the MoE architecture only. */
static int valid_shape(const lw__synth_preset *p) {
    static const char *archs[] = {"llama",  "qwen2", "qwen3",    "gemma2",
                                  "gemma3", "phi3",  "qwen3moe", "gemma4"};
    int known = 0;
    for (size_t i = 0; p->arch && i < sizeof archs / sizeof archs[0]; i++)
        known |= !strcmp(p->arch, archs[i]);
    /* experts exactly for the MoE architecture (and where gemma4 has them), within llama.cpp's limits */
    const int moe = p->arch && !strcmp(p->arch, "qwen3moe"), gemma4 = p->arch && !strcmp(p->arch, "gemma4");
    if ((moe != (p->n_expert > 0) && !gemma4) || p->n_expert > 512 ||
        (p->n_expert && (p->n_expert_used == 0 || p->n_expert_used > p->n_expert || p->n_ff_exp == 0 ||
                         p->n_ff_exp > (1u << 20))))
        return 0;
    /* gemma4: both head sizes, a window and a period, a rope_freqs table for the global blocks, heads that
     * group the KV heads of either kind */
    if (p->arch && !strcmp(p->arch, "gemma4") &&
        (!p->head_dim || !p->head_dim_swa || p->head_dim_swa % 2 || p->head_dim_swa > 4096 ||
         !p->sliding_window || p->swa_period < 2 || p->swa_period > 512 || !(p->rope_partial > 0.f) ||
         p->rope_partial > 1.f || p->n_embd_per_layer > 65536 || p->n_ff > (1u << 19) ||
         (p->n_head_kv_global && (p->n_head_kv_global > p->n_head || p->n_head % p->n_head_kv_global))))
        return 0;
    const uint32_t hd = p->n_head ? lw__synth_head_dim(p) : 0;
    return known && p->name && p->n_embd > 0 && p->n_embd <= 65536 && p->n_layer > 0 && p->n_layer <= 512 &&
           p->n_head > 0 && p->n_head <= 1024 && p->n_head_kv > 0 && p->n_head % p->n_head_kv == 0 &&
           p->n_ff > 0 && p->n_ff <= (1u << 20) && hd > 0 && hd <= 4096 && hd % 2 == 0 &&
           (p->head_dim || p->n_embd % p->n_head == 0);
}

lw_status lw__synth_write(const lw__synth_params *params, const char *path, const lw_allocator *alloc,
                          lw__synth_result *res, char *err) {
    lw__synth_result r_local;
    if (!res) res = &r_local;
    memset(res, 0, sizeof *res);
    err[0] = 0;
    if (!params || !path) return lw__errorf(err, LW_ERR_INVALID_ARG, "no parameters or output path");
    const lw__synth_preset *p = params->custom ? params->custom : lw__synth_preset_find(params->preset);
    if (!p)
        return lw__errorf(err, LW_ERR_INVALID_ARG, "unknown preset '%s'",
                          params->preset ? params->preset : "");
    if (!valid_shape(p)) return lw__errorf(err, LW_ERR_INVALID_ARG, "preset '%s': unusable shape", p->name);
    const lw__synth_ftype *ft = lw__synth_ftype_find(params->type);
    if (!ft)
        return lw__errorf(err, LW_ERR_INVALID_ARG, "unknown type '%s'", params->type ? params->type : "");
    const uint32_t n_layer = params->n_layer ? params->n_layer : p->n_layer;
    if (n_layer > 512) return lw__errorf(err, LW_ERR_INVALID_ARG, "%u layers is too many", n_layer);

    const lw_allocator al = lw__allocator_or_default(alloc); /* lw__malloc needs a concrete one */
    lw_gguf_writer *w = NULL;
    lw__synth_tensor *ts = NULL;
    job *jobs = NULL;
    synth_ctx ctx = {.p = p, .err = err};
    atomic_init(&ctx.prc, LW_OK);
    if (params->n_threads < 0 || params->n_threads > 512)
        return lw__errorf(err, LW_ERR_INVALID_ARG, "%d threads is outside 1..512", params->n_threads);
    const int n_threads = params->n_threads > 1 ? params->n_threads : 1;
    lw_status rc = lw__pool_create(alloc, n_threads, &ctx.pool);
    /* fewer threads than asked (none can be started where pthreads are absent): the file is the same */
    if (rc != LW_OK && n_threads > 1) rc = lw__pool_create(alloc, 1, &ctx.pool);
    if (rc != LW_OK) return lw__errorf(err, rc, "cannot create the thread pool");
    if ((rc = lw_gguf_writer_new(alloc, &w)) != LW_OK) {
        lw__pool_free(ctx.pool);
        return lw__errorf(err, rc, "cannot create the writer");
    }

    /* metadata: general, architecture, tokenizer */
    /* general.name stays free of model names: llama.cpp's vocab loader keys token attributes on it (a name
     * containing "phi3" makes it look up Phi-3's special tokens in whatever vocab the file has). */
    if ((rc = lw_gguf_writer_set_str(w, "general.architecture", p->arch)) != LW_OK ||
        (rc = lw_gguf_writer_set_str(w, "general.name", "llamaweb synth")) != LW_OK ||
        (rc = lw_gguf_writer_set_str(w, "general.basename", p->name)) != LW_OK ||
        (rc = lw_gguf_writer_set_u32(w, "general.file_type", ft->ftype)) != LW_OK ||
        (rc = lw_gguf_writer_set_u32(w, "general.quantization_version", 2)) != LW_OK) {
        lw__errorf(err, rc, "metadata: %s", lw_gguf_writer_error(w));
        goto done;
    }
    const char *vocab = params->vocab_path;
    char def_vocab[512];
    if (!vocab && params->n_vocab) vocab = "builtin"; /* a vocab size asks for the built-in vocab */
    if (!vocab) {
        snprintf(def_vocab, sizeof def_vocab, "%s/vocab/ggml-vocab-llama-spm.gguf",
                 params->shared_dir ? params->shared_dir : "../shared");
        FILE *f = fopen(def_vocab, "rb");
        vocab = f ? def_vocab : "builtin";
        if (f) fclose(f);
    }
    int64_t n_vocab = 0;
    if (!strcmp(vocab, "builtin")) {
        n_vocab = params->n_vocab ? params->n_vocab : 259;
        rc = builtin_vocab(w, n_vocab, &al, err);
    } else if (params->n_vocab) {
        rc = lw__errorf(err, LW_ERR_INVALID_ARG, "a vocab size is only for the built-in vocab");
    } else {
        rc = copy_vocab(w, vocab, alloc, &n_vocab, params->chat_template != NULL, err);
    }
    if (rc == LW_OK && params->chat_template &&
        (rc = lw_gguf_writer_set_str(w, "tokenizer.chat_template", params->chat_template)) != LW_OK)
        lw__errorf(err, rc, "chat template: %s", lw_gguf_writer_error(w));
    if (rc != LW_OK) {
        if (!err[0]) lw__errorf(err, rc, "vocab: %s", lw_gguf_writer_error(w));
        goto done;
    }
    snprintf(res->vocab_from, sizeof res->vocab_from, "%s", vocab);
    res->n_vocab = n_vocab;
    if ((rc = set_arch_keys(w, p, n_layer, n_vocab)) != LW_OK) {
        lw__errorf(err, rc, "metadata: %s", lw_gguf_writer_error(w));
        goto done;
    }

    /* tensors: plan, types, scratch sizes */
    const size_t nt = lw__synth_plan(p, n_layer, n_vocab, NULL, 0);
    ts = lw__calloc(&al, nt, sizeof *ts);
    jobs = lw__calloc(&al, nt, sizeof *jobs);
    if (!ts || !jobs) {
        rc = lw__errorf(err, LW_ERR_NOMEM, "out of memory for %zu tensors", nt);
        goto done;
    }
    lw__synth_plan(p, n_layer, n_vocab, ts, nt);
    size_t f_need = 0, q_need = 0;
    for (size_t i = 0; i < nt; i++) {
        job *jb = &jobs[i];
        jb->ctx = &ctx;
        jb->t = ts[i];
        jb->t.type = lw__synth_tensor_type(ft, params->pure, p, n_layer, p->tied, &ts[i]);
        if (jb->t.type == LW_TYPE_COUNT) {
            rc = lw__errorf(err, LW_ERR_UNSUPPORTED,
                            "%s: rows of %" PRId64
                            " are not whole %s blocks and llama.cpp has no fallback type",
                            jb->t.name, jb->t.ne[0], lw_type_get(ft->type)->name);
            goto done;
        }
        jb->tseed = tensor_seed(params->seed, jb->t.name);
        jb->scale = 1.0f / sqrtf((float)jb->t.ne[0]);
        const lw__quant_traits_t *tr = lw__quant_traits(jb->t.type);
        jb->random_blocks = tr && (!tr->quantize || tr->requires_imatrix);
        lw_status st = LW_OK;
        jb->row_bytes = lw__row_size(jb->t.type, jb->t.ne[0], &st);
        if (st != LW_OK || !tr || jb->row_bytes == 0) {
            rc = lw__errorf(err, st != LW_OK ? st : LW_ERR_UNSUPPORTED, "%s: no %s rows of %" PRId64,
                            jb->t.name, lw_type_get(jb->t.type) ? lw_type_get(jb->t.type)->name : "?",
                            jb->t.ne[0]);
            goto done;
        }
        if (jb->random_blocks) {
            const float r = jb->t.kind == LW_SYNTH_MATRIX ? iq_sd_per_amax(jb->t.type, &al) : 0.f;
            if (!(r > 0.f)) {
                rc = lw__errorf(err,
                                r == 0.f && jb->t.kind == LW_SYNTH_MATRIX ? LW_ERR_NOMEM : LW_ERR_UNSUPPORTED,
                                "%s: no random %s blocks", jb->t.name, lw_type_get(jb->t.type)->name);
                goto done;
            }
            jb->amax = jb->scale / r;
        }
        int64_t br = (int64_t)BATCH_ELEMS * lw__pool_n_threads(ctx.pool) / jb->t.ne[0];
        br = br < 1 ? 1 : br > lw__synth_rows(&jb->t) ? lw__synth_rows(&jb->t) : br;
        jb->batch_rows = br;
        size_t fe, qb;
        if (!lw__mul_size((size_t)br, (size_t)jb->t.ne[0], &fe) ||
            !lw__mul_size((size_t)br, jb->row_bytes, &qb)) {
            rc = lw__errorf(err, LW_ERR_OVERFLOW, "%s: batch size overflows", jb->t.name);
            goto done;
        }
        f_need = fe > f_need ? fe : f_need;
        q_need = qb > q_need ? qb : q_need;
        if ((rc = lw_gguf_writer_add_tensor(w, jb->t.name, jb->t.type, jb->t.n_dims, jb->t.ne, NULL, fill,
                                            jb)) != LW_OK) {
            lw__errorf(err, rc, "%s: %s", jb->t.name, lw_gguf_writer_error(w));
            goto done;
        }
        res->n_tensors++;
        res->n_params += (uint64_t)jb->t.ne[0] * (uint64_t)lw__synth_rows(&jb->t);
        res->n_bytes += jb->row_bytes * (uint64_t)lw__synth_rows(&jb->t);
    }
    ctx.f = lw__calloc(&al, f_need, sizeof(float));
    ctx.q = lw__malloc(&al, q_need);
    if (!ctx.f || !ctx.q) {
        rc = lw__errorf(err, LW_ERR_NOMEM, "out of memory for %zu bytes of scratch", f_need * 4 + q_need);
        goto done;
    }
    if ((rc = lw_gguf_writer_write_file(w, path, 0)) != LW_OK) {
        /* a fill failure left its reason in err; otherwise the writer has it */
        char why[LW_ERRMSG_SIZE];
        snprintf(why, sizeof why, "%s", err[0] ? err : lw_gguf_writer_error(w));
        lw__errorf(err, rc, "writing %s: %s", path, why);
    }
done:
    lw__free(&al, ctx.f);
    lw__free(&al, ctx.q);
    lw__free(&al, jobs);
    lw__free(&al, ts);
    lw_gguf_writer_free(w);
    lw__pool_free(ctx.pool);
    return rc;
}
