/* Shared test harness: llama.cpp itself as an oracle (libllama v0.4.0 as shipped by node-llama-cpp 3.21.1,
 * loaded with dlopen from node_modules relative to the repo root; tests skip with a message when absent).
 *
 * The llama.h / ggml.h structs below are local copies of the v0.4.0 layouts (include/llama.h,
 * src/llama-ext.h, ggml/include/ggml.h of that release): several are passed by value, so they must match
 * exactly; llama_oracle_layout_ok() checks documented defaults before a test relies on them.
 * Everything is static inline so a test includes this header and uses what it needs.
 *
 * Usage:
 *   const char *why = llama_oracle_open();
 *   if (why) test_skip(why);
 *   if (!llama_oracle_layout_ok()) test_skip("libllama's default params do not match the v0.4.0 layouts");
 *   void *m = ll.model_load_from_file(path, ll.model_default_params());   (NULL: see llama_oracle_log)
 */
#ifndef LW_LLAMA_ORACLE_H
#define LW_LLAMA_ORACLE_H

#include <dlfcn.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LLAMA_ORACLE_DIR "node_modules/@node-llama-cpp/linux-x64/bins/linux-x64"

/* ---------------------------------------------------------------------------------------------------------
 * llama.h / llama-ext.h / ggml.h v0.4.0 layouts (field by field; enums are int-sized)
 * ------------------------------------------------------------------------------------------------------- */

typedef struct ll_model_params {
    void *devices;
    const void *tensor_buft_overrides;
    int32_t n_gpu_layers;
    int32_t split_mode;
    int32_t load_mode;
    int32_t lazy_mode;
    int32_t main_gpu;
    const float *tensor_split;
    void *progress_callback;
    void *progress_callback_user_data;
    const void *kv_overrides;
    bool vocab_only, check_tensors, use_extra_bufts, no_host, no_alloc, load_mtp;
} ll_model_params;

typedef struct ll_context_params {
    uint32_t n_ctx, n_batch, n_ubatch, n_seq_max, n_rs_seq, n_outputs_max, n_outputs_max_per_seq;
    int32_t n_threads, n_threads_batch;
    int32_t ctx_type, rope_scaling_type, pooling_type, attention_type, flash_attn_type;
    float rope_freq_base, rope_freq_scale, yarn_ext_factor, yarn_attn_factor, yarn_beta_fast, yarn_beta_slow;
    uint32_t yarn_orig_ctx;
    float defrag_thold;
    void *cb_eval;
    void *cb_eval_user_data;
    int32_t type_k, type_v;
    void *abort_callback;
    void *abort_callback_data;
    bool embeddings, offload_kqv, no_perf, op_offload, swa_full, kv_unified;
    void *samplers;
    size_t n_samplers;
    void *ctx_other;
} ll_context_params;

typedef struct ll_batch {
    int32_t n_tokens;
    int32_t *token;
    float *embd;
    int32_t *pos;
    int32_t *n_seq_id;
    int32_t **seq_id;
    int8_t *logits;
} ll_batch;

typedef struct ll_quantize_params {
    int32_t nthread;
    int32_t ftype;                /* llama_ftype                  */
    int32_t output_tensor_type;   /* ggml_type (COUNT = default)  */
    int32_t token_embedding_type; /* ggml_type (COUNT = default)  */
    bool allow_requantize, quantize_output_tensor, only_copy, pure, keep_split, dry_run;
    const void *imatrix;
    const void *kv_overrides;
    const void *tt_overrides;
    const int32_t *prune_layers;
    size_t max_buf_size;
} ll_quantize_params;

/* llama-ext.h: a mock model for quantization-type tests. */
typedef struct ll_quant_model_desc {
    const char *architecture;
    uint32_t n_embd, n_ff, n_layer, n_head, n_head_kv, n_expert, n_embd_head_k, n_embd_head_v;
} ll_quant_model_desc;

typedef struct ll_ggml_init_params {
    size_t mem_size;
    void *mem_buffer;
    bool no_alloc;
} ll_ggml_init_params;

/* The entry points. Required ones are resolved by llama_oracle_open; optional ones (marked) may be NULL. */
static struct {
    void (*backend_init)(void);
    void (*log_set)(void (*cb)(int level, const char *text, void *user), void *user);
    void (*load_all_from_path)(const char *dir);
    ll_model_params (*model_default_params)(void);
    ll_context_params (*context_default_params)(void);
    void *(*model_load_from_file)(const char *path, ll_model_params p);
    void (*model_free)(void *m);
    void *(*init_from_model)(void *m, ll_context_params p);
    void (*free)(void *ctx);
    int32_t (*decode)(void *ctx, ll_batch b);
    float *(*get_logits_ith)(void *ctx, int32_t i);
    uint64_t (*model_n_params)(const void *m);
    uint64_t (*model_size)(const void *m);
    int32_t (*model_desc)(const void *m, char *buf, size_t n);
    ll_quantize_params (*model_quantize_default_params)(void);
    uint32_t (*model_quantize)(const char *in, const char *out, const ll_quantize_params *p);
    /* optional: llama-ext.h (C++ names) and ggml, for quantization-type selection without a file */
    void *(*quant_init)(const void *model, const ll_quantize_params *p);
    void (*quant_free)(void *qs);
    void *(*quant_model_from_metadata)(const ll_quant_model_desc *d);
    void (*quant_compute_types)(void *qs, int32_t ftype, void **tensors, int32_t *types, size_t n);
    void *(*ggml_init)(ll_ggml_init_params p);
    void (*ggml_free)(void *ctx);
    void *(*ggml_new_tensor)(void *ctx, int32_t type, int n_dims, const int64_t *ne);
    void *(*ggml_set_name)(void *t, const char *name);
    void *(*backend_load)(const char *path); /* optional: one CPU backend (LW_ORACLE_CPU_VARIANT) */
} ll;

/* The last messages llama.cpp logged at warning level or above (for failure reports). */
static char llama_oracle_log[2048];

static inline void llama_oracle_log_cb(int level, const char *text, void *user) {
    (void)user;
    if (level < 3 && level != 5) return; /* GGML_LOG_LEVEL_WARN = 3, ERROR = 4, CONT = 5 */
    size_t have = strlen(llama_oracle_log), add = strlen(text);
    if (have + add >= sizeof llama_oracle_log) have = 0; /* keep the latest */
    if (add >= sizeof llama_oracle_log) add = sizeof llama_oracle_log - 1;
    memcpy(llama_oracle_log + have, text, add);
    llama_oracle_log[have + add] = 0;
}

/* Whether this CPU has AMX int8 tiles (/proc/cpuinfo's amx_int8 flag). There llama.cpp's loader picks its
 * sapphirerapids build of ggml-cpu, which multiplies quantized weights on AMX tiles in an order of its own
 * that the engine does not reproduce (measured: test-oracle-llama / -gemma4 / -qwen3moe outside their
 * bounds, within them with the icelake build on the same host), so the oracle then loads the AVX-512 VNNI
 * build of the same ISA (icelake) unless LW_ORACLE_CPU_VARIANT names one. */
static inline int llama_oracle_host_has_amx(void) {
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f) return 0;
    char line[4096];
    int amx = 0;
    while (!amx && fgets(line, sizeof line, f))
        if (!strncmp(line, "flags", 5) && strstr(line, " amx_int8")) amx = 1;
    fclose(f);
    return amx;
}

/* Loads libllama and resolves the entry points; returns NULL on success, else why (for test_skip). */
static inline const char *llama_oracle_open(void) {
    static char why[1400];
    char path[1024];
    snprintf(path, sizeof path, "%s/libllama.v0.4.0.so", LLAMA_ORACLE_DIR);
    /* libllama's RUNPATH is $ORIGIN, so its libggml*.so dependencies resolve from the same folder */
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        snprintf(why, sizeof why, "llama.cpp oracle not available (%s); run npm install at the repo root",
                 dlerror());
        return why;
    }
    struct {
        void **fn;
        const char *name;
        int required;
    } syms[] = {
        {(void **)&ll.backend_init, "llama_backend_init", 1},
        {(void **)&ll.log_set, "llama_log_set", 1},
        {(void **)&ll.load_all_from_path, "ggml_backend_load_all_from_path", 1},
        {(void **)&ll.model_default_params, "llama_model_default_params", 1},
        {(void **)&ll.context_default_params, "llama_context_default_params", 1},
        {(void **)&ll.model_load_from_file, "llama_model_load_from_file", 1},
        {(void **)&ll.model_free, "llama_model_free", 1},
        {(void **)&ll.init_from_model, "llama_init_from_model", 1},
        {(void **)&ll.free, "llama_free", 1},
        {(void **)&ll.decode, "llama_decode", 1},
        {(void **)&ll.get_logits_ith, "llama_get_logits_ith", 1},
        {(void **)&ll.model_n_params, "llama_model_n_params", 1},
        {(void **)&ll.model_size, "llama_model_size", 1},
        {(void **)&ll.model_desc, "llama_model_desc", 1},
        {(void **)&ll.model_quantize_default_params, "llama_model_quantize_default_params", 1},
        {(void **)&ll.model_quantize, "llama_model_quantize", 1},
        {(void **)&ll.quant_init, "_Z16llama_quant_initPK11llama_modelPK27llama_model_quantize_params", 0},
        {(void **)&ll.quant_free, "_Z16llama_quant_freeP19quantize_state_impl", 0},
        {(void **)&ll.quant_model_from_metadata,
         "_Z31llama_quant_model_from_metadataPK22llama_quant_model_desc", 0},
        {(void **)&ll.quant_compute_types,
         "_Z25llama_quant_compute_typesP19quantize_state_impl11llama_ftypePP11ggml_tensorP9ggml_typem", 0},
        {(void **)&ll.ggml_init, "ggml_init", 0},
        {(void **)&ll.ggml_free, "ggml_free", 0},
        {(void **)&ll.ggml_new_tensor, "ggml_new_tensor", 0},
        {(void **)&ll.ggml_set_name, "ggml_set_name", 0},
        {(void **)&ll.backend_load, "ggml_backend_load", 0},
    };
    for (size_t i = 0; i < sizeof syms / sizeof syms[0]; i++) {
        *syms[i].fn = dlsym(h, syms[i].name);
        if (!*syms[i].fn && syms[i].required) {
            snprintf(why, sizeof why, "%s missing from %s", syms[i].name, path);
            return why;
        }
    }
    ll.log_set(llama_oracle_log_cb, NULL);
    ll.backend_init();
    /* the CPU backend is a separate, per-CPU-feature library: the best for this CPU, or the one named by
     * LW_ORACLE_CPU_VARIANT (e.g. "haswell": what an AVX2-only machine such as a CI runner would use) */
    const char *variant = getenv("LW_ORACLE_CPU_VARIANT");
    if ((!variant || !*variant) && llama_oracle_host_has_amx())
        variant = "icelake"; /* the sapphirerapids build's AMX path: see llama_oracle_host_has_amx */
    if (variant && *variant) {
        snprintf(path, sizeof path, "%s/libggml-cpu-%s.so", LLAMA_ORACLE_DIR, variant);
        if (!ll.backend_load || !ll.backend_load(path)) {
            snprintf(why, sizeof why, "LW_ORACLE_CPU_VARIANT: %s does not load here", path);
            return why;
        }
    } else {
        ll.load_all_from_path(LLAMA_ORACLE_DIR);
    }
    return NULL;
}

/* The per-CPU build of ggml-cpu that llama_oracle_open loaded ("zen4", "haswell", ...; NULL if none is
 * found); *gelu_table (optional) gets its ggml_table_gelu_f16 (filled when the backend started). */
static inline const char *llama_oracle_cpu_variant(const uint16_t **gelu_table) {
    static const char *const variants[] = {"alderlake", "cannonlake", "cascadelake", "cooperlake", "haswell",
                                           "icelake", "ivybridge", "piledriver", "sandybridge", "sapphirerapids",
                                           "skylakex", "sse42", "x64", "zen4"};
    char path[1024];
    for (size_t i = 0; i < sizeof variants / sizeof variants[0]; i++) {
        snprintf(path, sizeof path, "%s/libggml-cpu-%s.so", LLAMA_ORACLE_DIR, variants[i]);
        void *h = dlopen(path, RTLD_NOW | RTLD_NOLOAD);
        if (!h) continue;
        if (gelu_table) *gelu_table = (const uint16_t *)dlsym(h, "ggml_table_gelu_f16");
        return variants[i];
    }
    if (gelu_table) *gelu_table = NULL;
    return NULL;
}

/* 1 when the library's default params match the documented v0.4.0 defaults (the struct copies fit). */
static inline int llama_oracle_layout_ok(void) {
    ll_model_params mp = ll.model_default_params();
    ll_context_params cp = ll.context_default_params();
    ll_quantize_params qp = ll.model_quantize_default_params();
    return mp.n_gpu_layers == -1 && mp.use_extra_bufts && !mp.vocab_only && cp.n_ctx == 512 &&
           cp.n_batch == 2048 && cp.n_ubatch == 512 && cp.flash_attn_type == -1 && cp.type_k == 1 &&
           cp.type_v == 1 && cp.offload_kqv && cp.no_perf && cp.n_samplers == 0 && cp.ctx_other == NULL &&
           qp.ftype == 7 /* Q8_0 */ && qp.quantize_output_tensor && !qp.pure && !qp.dry_run &&
           qp.imatrix == NULL && qp.max_buf_size == (size_t)8 << 30;
}

/* 1 when the optional quantization-type entry points are there. */
static inline int llama_oracle_has_quant_types(void) {
    return ll.quant_init && ll.quant_free && ll.quant_model_from_metadata && ll.quant_compute_types &&
           ll.ggml_init && ll.ggml_free && ll.ggml_new_tensor && ll.ggml_set_name;
}

#endif
