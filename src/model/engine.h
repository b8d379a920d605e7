/* The CPU inference engine API: load a GGUF model, create a context (KV cache + planned activations +
 * threads), decode batches of token ids, read logits. Every function returns lw_status and keeps a message
 * on its object. (The lead moves these declarations into include/llamaweb.h.)
 *
 * Architectures: llama (incl. Llama 3.1/3.2 RoPE frequency factors), qwen2, qwen3, phi3, gemma2 (soft-capped
 * scores and logits), gemma3; RoPE scaling none, linear or YaRN. Weights: f32, f16 and the quantized formats
 * with CPU dot products (src/cpu/quant-dot.h). Logits equal llama.cpp's (v0.4.0, AVX-512 build) to the bit
 * for the tested models; see tests/test-oracle-llama.c.
 *
 *     lw_model *m; lw_context *c;
 *     if (lw_model_load_file("stories260K.gguf", NULL, &m) != LW_OK) { puts(lw_model_error(m)); ... }
 *     lw_context_params cp = lw_context_default_params(); cp.n_ctx = 512;
 *     lw_context_create(m, &cp, &c);
 *     int32_t ids[] = {1, 403, 407, 261, 378};
 *     lw_decode(c, ids, 5, 0);                    // appends at position lw_context_n_past(c)
 *     const float *logits = lw_get_logits(c, -1); // n_vocab floats for the last token
 */
#ifndef LW_ENGINE_H
#define LW_ENGINE_H

#include "llamaweb.h"

/* ---------------------------------------------------------------------------------------------------------
 * Models
 * ------------------------------------------------------------------------------------------------------- */

typedef struct lw_model lw_model;

typedef struct lw_model_params {
    const lw_allocator *alloc; /* NULL: the C library's malloc family                                       */
    int no_weights;            /* 1: parse the header and bind every tensor (names, shapes, types, file
                                  offsets) without reading weight bytes; such a model cannot make a CPU
                                  context, it feeds a backend that streams the bytes itself (WebGPU) */
} lw_model_params;

lw_model_params lw_model_default_params(void);

/* Loads weights from a GGUF file (read into one allocation; no mmap). As lw_gguf_open, *out is set even
 * when loading fails (unless memory ran out) so lw_model_error(*out) can be read: free it either way. */
lw_status lw_model_load_file(const char *path, const lw_model_params *params, lw_model **out);
/* Same from a byte source; the source must outlive the model. */
lw_status lw_model_load_source(lw_source *src, const lw_model_params *params, lw_model **out);
void lw_model_free(lw_model *m);
const char *lw_model_error(const lw_model *m);

const char *lw_model_arch(const lw_model *m); /* e.g. "llama" */
int32_t lw_model_n_vocab(const lw_model *m);
int32_t lw_model_n_embd(const lw_model *m);
int32_t lw_model_n_layer(const lw_model *m);
int32_t lw_model_n_ctx_train(const lw_model *m);
uint64_t lw_model_weight_bytes(const lw_model *m); /* bytes of the weight allocation */
/* The parsed GGUF header (metadata: tokenizer, chat template, ...), owned by the model. */
lw_gguf *lw_model_gguf(const lw_model *m);

/* ---------------------------------------------------------------------------------------------------------
 * Contexts
 * ------------------------------------------------------------------------------------------------------- */

typedef struct lw_context lw_context;

typedef struct lw_context_params {
    uint32_t n_ctx;     /* KV cache cells; 0: the model's training context, at most 4096 (default 0)      */
    uint32_t n_batch;   /* most tokens one step computes; longer decodes are split (default 512)          */
    int32_t n_threads;  /* threads for a step; 0: the online processors, at most 8 (default 0)            */
    uint32_t type_k;    /* LW_TYPE_F16 (default, as llama.cpp) or LW_TYPE_F32                            */
    uint32_t type_v;    /* must equal type_k for now                                                      */
    int32_t flash_attn; /* 1 (default): attention as llama.cpp's CPU default (flash attention); 0: as
                           llama.cpp with flash attention off (KQ, softmax, KQV; reference speed)          */
} lw_context_params;

lw_context_params lw_context_default_params(void);

/* Plans and allocates everything a decode needs (KV cache, activation arena, scratch, threads). As
 * lw_model_load_file, *out is set on failure when possible. The model must outlive the context. */
lw_status lw_context_create(lw_model *m, const lw_context_params *params, lw_context **out);
void lw_context_free(lw_context *c);
const char *lw_context_error(const lw_context *c);

uint32_t lw_context_n_ctx(const lw_context *c);
uint32_t lw_context_n_batch(const lw_context *c);
int32_t lw_context_n_threads(const lw_context *c);
/* Bytes allocated by the context (arena: KV cache + activations + scratch + logits). */
uint64_t lw_context_bytes(const lw_context *c);

/* Cells of the KV cache in use = position of the next token. */
uint32_t lw_context_n_past(const lw_context *c);
/* Forgets cells from n_past on (n_past <= lw_context_n_past), e.g. 0 to start over. */
lw_status lw_context_set_n_past(lw_context *c, uint32_t n_past);

/* Appends n tokens at position lw_context_n_past and computes them. logits_all != 0 keeps the logits of
 * every token (then n <= n_batch); otherwise only the last token's. Allocates nothing. */
lw_status lw_decode(lw_context *c, const int32_t *tokens, int32_t n, int logits_all);
/* Logits of output row i of the last decode (n_vocab floats), or NULL; i = -1 is the last row. */
const float *lw_get_logits(const lw_context *c, int32_t i);
/* Output rows of the last decode. */
int32_t lw_get_n_outputs(const lw_context *c);

/* Observer of every intermediate result while decoding (for comparing backends or debugging): called on
 * one thread after each graph node with the tensor's name (llama.cpp's names where it has them:
 * "attn_norm", "Qcur", "kqv_out", "ffn_out", "l_out", "result_output", ...), its block (-1 outside
 * blocks), and rows of ne0 floats valid only during the call. NULL removes it. */
typedef void (*lw_eval_fn)(void *user, const char *name, int32_t layer, const float *data, int64_t ne0, int64_t rows);
void lw_context_set_eval_callback(lw_context *c, lw_eval_fn fn, void *user);

/* Samples a token from output row i (-1: the last) with a sampler (src/sample/sample.h) and records it for
 * the sampler's penalties; -1 when there is no such row. Allocates nothing. */
struct lw_sampler;
int32_t lw_sample(const lw_context *c, struct lw_sampler *s, int32_t i);

#endif
