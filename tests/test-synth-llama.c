/* Synthetic models against llama.cpp itself (libllama v0.4.0 via tests/llama-oracle.h; skipped when absent):
 *   1. tensor types: for every preset x every llama.cpp file type (and --pure), our per-tensor type equals
 *      llama.cpp's own selection (llama_quant_compute_types on a mock model of the same shape);
 *   2. loading: every tiny preset x several types loads with llama_model_load_from_file, llama_model_n_params
 *      equals our count, and decoding a few tokens gives finite, non-constant logits;
 *   3. quantizing: llama_model_quantize of our f32 file gives the same tensor types and the same bytes as our
 *      file of that type made with the same seed (types with a real quantizer here).
 * LW_SYNTH_BIG=1 also synthesizes llama-3.2-1b q4_0 (0.6 GB with the 32000-token vocab), qwen2.5-0.5b q4_k_m,
 * qwen3-0.6b q8_0, gemma-3-1b q4_0 and phi-3-mini q4_0 in LW_TMP, loads and decodes them, and removes them. */
#include "llama-oracle.h"
#include "quant/quant.h"
#include "synth/synth.h"
#include "test.h"

#include <math.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define N_VOCAB_MOCK 32000 /* vocab rows for the type-selection check (types do not depend on it) */

/* ---------------------------------------------------------------------------------------------------------
 * 1. Type selection
 * ------------------------------------------------------------------------------------------------------- */

static void check_types(const lw__synth_preset *p, int pure) {
    const uint32_t nl = p->n_layer;
    const size_t nt = lw__synth_plan(p, nl, N_VOCAB_MOCK, NULL, 0);
    lw__synth_tensor *ts = calloc(nt, sizeof *ts);
    void **tensors = calloc(nt, sizeof *tensors);
    int32_t *types = calloc(nt, sizeof *types);
    lw__synth_plan(p, nl, N_VOCAB_MOCK, ts, nt);

    ll_ggml_init_params gp = {.mem_size = 64u << 20, .mem_buffer = NULL, .no_alloc = true};
    void *gctx = ll.ggml_init(gp);
    for (size_t i = 0; i < nt; i++) {
        tensors[i] = ll.ggml_new_tensor(gctx, LW_TYPE_F32, (int)ts[i].n_dims, ts[i].ne);
        ll.ggml_set_name(tensors[i], ts[i].name);
    }
    const uint32_t hd = lw__synth_head_dim(p);
    ll_quant_model_desc d = {p->arch, p->n_embd, p->n_ff, nl, p->n_head, p->n_head_kv, p->n_expert, hd, hd};
    void *model = ll.quant_model_from_metadata(&d);
    ll_quantize_params qp = ll.model_quantize_default_params();
    qp.pure = pure != 0;
    void *qs = ll.quant_init(model, &qp);

    int n_ftypes = 0, n_diff = 0;
    for (size_t f = 0; lw__synth_ftype_at(f); f++) {
        const lw__synth_ftype *ft = lw__synth_ftype_at(f);
        if (!ft->mix) continue; /* pure types are no llama_ftype of their own */
        /* llama.cpp throws ("no tensor type fallback") where we return LW_TYPE_COUNT (q1_0 on 64-wide rows):
         * it cannot make such a file, and the throw cannot be caught from C, so those are not compared */
        int throws = 0;
        for (size_t i = 0; i < nt; i++)
            throws |= lw__synth_tensor_type(ft, pure, p, nl, p->tied, &ts[i]) == LW_TYPE_COUNT;
        CHECK_MSG(!throws || ft->type == LW_TYPE_Q1_0, "%s %s: no type for a tensor", p->name, ft->name);
        if (throws) continue;
        n_ftypes++;
        ll.quant_compute_types(qs, (int32_t)ft->ftype, tensors, types, nt);
        for (size_t i = 0; i < nt; i++) {
            uint32_t ours = lw__synth_tensor_type(ft, pure, p, nl, p->tied, &ts[i]);
            if ((int32_t)ours != types[i]) {
                n_diff++;
                CHECK_MSG(0, "%s %s%s %s: ours %s, llama.cpp %s", p->name, ft->name, pure ? " pure" : "",
                          ts[i].name, lw_type_get(ours)->name,
                          lw_type_get((uint32_t)types[i]) ? lw_type_get((uint32_t)types[i])->name : "?");
            }
        }
    }
    printf("types: %-13s %s: %d file types x %zu tensors, %d differences from llama_quant_compute_types\n",
           p->name, pure ? "pure" : "mix ", n_ftypes, nt, n_diff);
    ll.quant_free(qs);
    ll.model_free(model);
    ll.ggml_free(gctx);
    free(types);
    free(tensors);
    free(ts);
}

/* ---------------------------------------------------------------------------------------------------------
 * 2. Loading and decoding in llama.cpp
 * ------------------------------------------------------------------------------------------------------- */

static int synth(const char *preset, const char *type, const char *vocab, uint64_t seed, const char *path,
                 lw__synth_result *res) {
    lw__synth_params sp = {
        .preset = preset, .type = type, .vocab_path = vocab, .shared_dir = test_shared_dir(), .seed = seed};
    char err[LW_ERRMSG_SIZE];
    lw_status rc = lw__synth_write(&sp, path, NULL, res, err);
    CHECK_MSG(rc == LW_OK, "synth %s %s: %s", preset, type, err);
    return rc == LW_OK;
}

/* Loads path in llama.cpp, checks the parameter count and that a few decoded tokens give sane logits. */
static void load_and_decode(const char *what, const char *path, const lw__synth_result *res) {
    llama_oracle_log[0] = 0;
    ll_model_params mp = ll.model_default_params();
    void *m = ll.model_load_from_file(path, mp);
    CHECK_MSG(m != NULL, "%s: llama.cpp failed to load: %s", what, llama_oracle_log);
    if (!m) return;
    uint64_t np = ll.model_n_params(m);
    CHECK_MSG(np == res->n_params, "%s: llama_model_n_params %llu, ours %llu", what, (unsigned long long)np,
              (unsigned long long)res->n_params);
    ll_context_params cp = ll.context_default_params();
    cp.n_ctx = 64, cp.n_batch = cp.n_ubatch = 64, cp.n_threads = cp.n_threads_batch = 1;
    void *c = ll.init_from_model(m, cp);
    CHECK_MSG(c != NULL, "%s: llama_init_from_model failed: %s", what, llama_oracle_log);
    if (c) {
        int32_t tok[4] = {1, 100 % (int32_t)res->n_vocab, 200 % (int32_t)res->n_vocab, 7}, pos[4], nseq[4],
                s0 = 0, *seq[4];
        int8_t lg[4] = {0, 0, 0, 1};
        for (int i = 0; i < 4; i++) pos[i] = i, nseq[i] = 1, seq[i] = &s0;
        ll_batch b = {4, tok, NULL, pos, nseq, seq, lg};
        int32_t dr = ll.decode(c, b);
        CHECK_MSG(dr == 0, "%s: llama_decode returned %d", what, dr);
        const float *l = dr == 0 ? ll.get_logits_ith(c, -1) : NULL;
        if (l) {
            int finite = 1;
            float lo = l[0], hi = l[0];
            for (int64_t i = 0; i < res->n_vocab; i++) {
                finite &= isfinite(l[i]) != 0;
                lo = l[i] < lo ? l[i] : lo, hi = l[i] > hi ? l[i] : hi;
            }
            CHECK_MSG(finite, "%s: non-finite logits", what);
            CHECK_MSG(hi - lo > 1e-3f && hi - lo < 1e3f, "%s: logit range %g..%g", what, lo, hi);
            printf("load: %-30s %8llu params, loads in llama.cpp, logits %.3g..%.3g\n", what,
                   (unsigned long long)np, lo, hi);
        }
        ll.free(c);
    }
    ll.model_free(m);
}

/* ---------------------------------------------------------------------------------------------------------
 * 3. llama_model_quantize of our f32 file vs our file of that type
 * ------------------------------------------------------------------------------------------------------- */

static lw_gguf *open_gguf(const char *path, lw_source **src) {
    lw_gguf *g = NULL;
    char e[256];
    if (lw_source_open_file(path, NULL, src, e, sizeof e) != LW_OK) return NULL;
    if (lw_gguf_open(*src, NULL, &g) != LW_OK) {
        lw_gguf_close(g);
        lw_source_close(*src);
        return NULL;
    }
    return g;
}

static void check_quantize(const char *preset, const char *type, const char *tmp) {
    char f32[512], ref[512], ours[512];
    snprintf(f32, sizeof f32, "%s/synth-q-%s-f32.gguf", tmp, preset);
    snprintf(ref, sizeof ref, "%s/synth-q-%s-%s-llama.gguf", tmp, preset, type);
    snprintf(ours, sizeof ours, "%s/synth-q-%s-%s.gguf", tmp, preset, type);
    lw__synth_result r1, r2;
    if (!synth(preset, "f32", "builtin", 7, f32, &r1) || !synth(preset, type, "builtin", 7, ours, &r2))
        return;
    const lw__synth_ftype *ft = lw__synth_ftype_find(type);
    ll_quantize_params qp = ll.model_quantize_default_params();
    qp.ftype = (int32_t)ft->ftype;
    qp.nthread = 1;
    llama_oracle_log[0] = 0;
    uint32_t qr = ll.model_quantize(f32, ref, &qp);
    CHECK_MSG(qr == 0, "llama_model_quantize %s %s failed: %s", preset, type, llama_oracle_log);
    lw_source *sa = NULL, *sb = NULL;
    lw_gguf *a = qr == 0 ? open_gguf(ours, &sa) : NULL, *b = a ? open_gguf(ref, &sb) : NULL;
    CHECK(qr != 0 || (a && b));
    int n_same_bytes = 0, n_random = 0, n = 0;
    uint32_t fa = 0, fb = 1;
    if (a && b) {
        CHECK(lw_gguf_get_u32(a, "general.file_type", &fa) == LW_OK &&
              lw_gguf_get_u32(b, "general.file_type", &fb) == LW_OK);
        CHECK_MSG(fa == fb, "%s %s: general.file_type %u vs llama.cpp %u", preset, type, fa, fb);
        CHECK(lw_gguf_n_tensors(a) == lw_gguf_n_tensors(b));
        for (int64_t i = 0; i < lw_gguf_n_tensors(a); i++) {
            const lw_gguf_tensor *ta = lw_gguf_tensor_at(a, i);
            int64_t j = lw_gguf_find_tensor(b, ta->name);
            CHECK_MSG(j >= 0, "%s missing from llama.cpp's file", ta->name);
            if (j < 0) continue;
            const lw_gguf_tensor *tb = lw_gguf_tensor_at(b, j);
            n++;
            CHECK_MSG(ta->type == tb->type, "%s %s %s: type %s vs llama.cpp %s", preset, type, ta->name,
                      lw_type_get(ta->type)->name, lw_type_get(tb->type)->name);
            const lw__quant_traits_t *tr = lw__quant_traits(ta->type);
            if (ta->type != tb->type || ta->n_bytes != tb->n_bytes || !tr) continue;
            if (!tr->quantize || tr->requires_imatrix) {
                n_random++; /* random valid blocks: no byte equality expected */
                continue;
            }
            uint8_t *da = malloc(ta->n_bytes), *db = malloc(tb->n_bytes);
            CHECK(lw_gguf_read_tensor(a, i, 0, da, ta->n_bytes) == LW_OK);
            CHECK(lw_gguf_read_tensor(b, j, 0, db, tb->n_bytes) == LW_OK);
            int same = memcmp(da, db, ta->n_bytes) == 0;
            CHECK_MSG(same, "%s %s %s (%s): bytes differ from llama.cpp's quantization", preset, type,
                      ta->name, lw_type_get(ta->type)->name);
            n_same_bytes += same;
            free(da);
            free(db);
        }
    }
    printf("quantize: %-12s %-7s %d tensors: types equal, %d byte-identical to llama_model_quantize, %d "
           "random IQ\n",
           preset, type, n, n_same_bytes, n_random);
    lw_gguf_close(a);
    lw_gguf_close(b);
    lw_source_close(sa);
    lw_source_close(sb);
    remove(f32), remove(ref), remove(ours);
}

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* Full-size preset: synthesize (default vocab), load and decode in llama.cpp, report size and times. */
static void big(const char *preset, const char *type, const char *tmp) {
    char path[512], what[96];
    snprintf(path, sizeof path, "%s/synth-%s-%s.gguf", tmp, preset, type);
    snprintf(what, sizeof what, "%s %s", preset, type);
    lw__synth_result r;
    double t0 = now_s();
    if (synth(preset, type, NULL, 1, path, &r)) {
        double t1 = now_s();
        struct stat st;
        stat(path, &st);
        printf("big: %s: %.3f GB file, %llu params, synthesized in %.1f s\n", what, (double)st.st_size / 1e9,
               (unsigned long long)r.n_params, t1 - t0);
        load_and_decode(what, path, &r);
        printf("big: %s loaded and decoded in llama.cpp in %.1f s\n", what, now_s() - t1);
    }
    remove(path);
}

int main(void) {
    const char *why = llama_oracle_open();
    if (why) test_skip(why);
    if (!llama_oracle_layout_ok())
        test_skip("libllama's default params do not match the v0.4.0 layouts copied here");
    const char *tmp = test_tmp_dir();
    mkdir(tmp, 0777);

    /* 1 */
    if (llama_oracle_has_quant_types()) {
        for (size_t i = 0; lw__synth_preset_at(i); i++) check_types(lw__synth_preset_at(i), 0);
        check_types(lw__synth_preset_find("llama-3.2-1b"), 1);
        check_types(lw__synth_preset_find("tiny-phi3"), 1);
    } else {
        printf(
            "types: llama_quant_compute_types not exported by this libllama, type selection not checked\n");
    }

    /* 2 */
    static const char *types[] = {"f32",    "f16",    "bf16", "q4_0" /* default vocab */,
                                  "q8_0",   "q4_k_m", "q2_k", "iq2_xxs",
                                  "iq4_xs", "tq1_0"};
    for (size_t i = 0; lw__synth_preset_at(i); i++) {
        const lw__synth_preset *p = lw__synth_preset_at(i);
        if (strncmp(p->name, "tiny", 4)) continue;
        for (size_t k = 0; k < sizeof types / sizeof types[0]; k++) {
            char path[512], what[96];
            snprintf(path, sizeof path, "%s/synth-load-%s-%s.gguf", tmp, p->name, types[k]);
            snprintf(what, sizeof what, "%s %s", p->name, types[k]);
            lw__synth_result r;
            /* the default vocab (llama-spm, 32000 tokens, copied from ../shared) for one type per preset, the
             * built-in byte vocab for the others (keeps the test fast under ASAN) */
            const char *vocab = k == 3 ? NULL : "builtin";
            if (synth(p->name, types[k], vocab, 42, path, &r)) load_and_decode(what, path, &r);
            remove(path);
        }
    }

    { /* a Llama-3-sized built-in vocabulary (128256 tokens, --vocab-size) */
        char path[512];
        snprintf(path, sizeof path, "%s/synth-load-vocab128k.gguf", tmp);
        lw__synth_params sp = {.preset = "tiny", .type = "q4_0", .vocab_path = "builtin", .n_vocab = 128256};
        lw__synth_result r;
        char err[LW_ERRMSG_SIZE];
        CHECK_MSG(lw__synth_write(&sp, path, NULL, &r, err) == LW_OK, "%s", err);
        if (r.n_vocab == 128256) load_and_decode("tiny q4_0 128256-token vocab", path, &r);
        remove(path);
    }

    /* 3 */
    check_quantize("tiny", "q4_k_m", tmp);
    check_quantize("tiny", "q2_k", tmp);
    check_quantize("tiny-phi3", "q3_k_m", tmp);
    check_quantize("tiny-qwen2", "iq4_xs", tmp);
    check_quantize("tiny-gemma3", "q5_k_m", tmp);
    check_quantize("tiny-qwen3", "q4_0", tmp);

    if (getenv("LW_SYNTH_BIG")) {
        big("llama-3.2-1b", "q4_0", tmp);
        big("qwen2.5-0.5b", "q4_k_m", tmp);
        big("qwen3-0.6b", "q8_0", tmp);
        big("gemma-3-1b", "q4_0", tmp);
        big("phi-3-mini", "q4_0", tmp);
    }
    return test_summary("test-synth-llama");
}
