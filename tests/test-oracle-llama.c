/* Whole-model oracle: our engine against llama.cpp itself (libllama v0.4.0 as shipped by node-llama-cpp
 * 3.21.1, loaded with dlopen from node_modules; skipped with a message when absent).
 *
 * For each model: decode BOS + "Once upon a time" = [1, 403, 407, 261, 378] in one batch with logits at
 * every position in both engines and compare (max |diff| / logit range of the reference, per position);
 * then generate 256 greedy tokens with our engine, feeding the same tokens to llama.cpp one at a time, and
 * count how often both pick the same top-1 token (ties within 1e-4 of the range are counted separately).
 *
 * llama.cpp runs with its defaults where they matter for numerics: F16 KV cache, flash attention AUTO
 * (enabled on CPU), 1 thread. Our engine uses its defaults (F16 KV cache, ggml-like attention).
 *
 * libllama is loaded through tests/llama-oracle.h (the v0.4.0 struct layouts, checked against documented
 * defaults before use), the comparison is tests/oracle-compare.h's (shared with test-oracle-qwen3moe.c).
 * LW_ORACLE_CPU_VARIANT=haswell (etc.) makes llama.cpp use that CPU build. */
#include "oracle-compare.h"

#include "cpu/engine-ops.h"
#include "synth/synth.h"
#include "engine-synth.h"

/* YaRN keys as convert_hf_to_gguf.py writes them (factor 4 over an original context of 64, so the ramp
 * between the correction dims covers dims 0..9 of 64 and positions of the 100-token prompt reach past it) */
static void yarn_keys(lw_gguf_writer *w, const char *arch) {
    char k[128];
    snprintf(k, sizeof(k), "%s.rope.scaling.type", arch);
    lw_gguf_writer_set_str(w, k, "yarn");
    snprintf(k, sizeof(k), "%s.rope.scaling.factor", arch);
    lw_gguf_writer_set_f32(w, k, 4.0f);
    snprintf(k, sizeof(k), "%s.rope.scaling.original_context_length", arch);
    lw_gguf_writer_set_u32(w, k, 64);
}

int main(void) {
    load_llama();
    /* the struct copies must match the library: check documented defaults first */
    if (!llama_oracle_layout_ok()) test_skip("libllama's default params do not match the v0.4.0 layouts");
    static const int32_t once[5] = {1, 403, 407, 261, 378}; /* BOS + "Once upon a time" */
    char path[1024];
    /* LW_ORACLE_MODEL=file.gguf: compare that model only (e.g. a real-size synthetic model) */
    const char *only = getenv("LW_ORACLE_MODEL");
    if (only && *only) {
        int32_t p100[100];
        p100[0] = 1;
        for (int i = 1; i < 100; i++) p100[i] = 3 + (i * 37) % 500;
        compare_model(only, only, once, 5, 32, -1, 1e-3);
        compare_model(only, only, p100, 100, 8, -1, 1e-3);
        return test_summary("test-oracle-llama");
    }
    snprintf(path, sizeof(path), "%s/models/stories260K.gguf", test_shared_dir());
    compare_model(path, "stories260K.gguf", once, 5, 256, 432, 1e-3); /* llama.cpp's greedy continuation starts with 432 */
    snprintf(path, sizeof(path), "%s/models/llama-2-tiny-random.gguf", test_shared_dir());
    compare_model(path, "llama-2-tiny-random.gguf", once, 5, 256, -1, 1e-3);

    /* synthetic models with real head sizes (64) so ggml's SIMD paths and, with a 100-token prompt, its
     * tiled flash-attention path for batches of 64+ tokens are exercised */
    int32_t longp[100];
    longp[0] = 1;
    for (int i = 1; i < 100; i++) longp[i] = 3 + (i * 37) % 500;
    for (int k = 0; k < 2; k++) {
        synth_spec sp = {512, 256, 2, 4, 2, 512, k ? LW_TYPE_F16 : LW_TYPE_F32, k, 7 + k, NULL, 0, 0, 0};
        const char *name = k ? "synth-f16-tied.gguf" : "synth-f32.gguf";
        synth_path(path, sizeof(path), name);
        CHECK_MSG(synth_write(path, &sp) == 0, "writing %s", path);
        compare_model(path, name, once, 5, 64, -1, 1e-3);
        compare_model(path, name, longp, 100, 16, -1, 1e-3);
    }
    /* under the sanitizers (scripts/test.sh sets LW_TEST_SANITIZED; 3-10x slower) the relatives and most
     * quantized formats are left to the release run */
    const int light = getenv("LW_TEST_SANITIZED") != NULL;
    if (light) printf("LW_TEST_SANITIZED: qwen2/qwen3/phi3 and 10 of 13 quantized models skipped in this run\n");
    /* relatives plugged into the llama builder: qwen2 (biases, NeoX RoPE), qwen3 (per-head Q/K norms) */
    for (int k = 0; k < 2 && !light; k++) {
        synth_spec sp = {512, 256, 2, 4, 2, 512, LW_TYPE_F16, 0, 31 + k, k ? "qwen3" : "qwen2", !k, k, 0};
        const char *name = k ? "synth-qwen3-f16.gguf" : "synth-qwen2-f16.gguf";
        synth_path(path, sizeof(path), name);
        CHECK_MSG(synth_write(path, &sp) == 0, "writing %s", path);
        compare_model(path, name, once, 5, 32, -1, 1e-3);
        compare_model(path, name, longp, 100, 8, -1, 1e-3);
    }
    /* phi3: fused QKV and gate|up tensors, Q scaled before attention */
    if (!light) {
        synth_spec sp = {512, 256, 2, 4, 4, 512, LW_TYPE_F16, 0, 41, "phi3", 0, 0, 1};
        synth_path(path, sizeof(path), "synth-phi3-f16.gguf");
        CHECK_MSG(synth_write(path, &sp) == 0, "writing %s", path);
        compare_model(path, "synth-phi3-f16.gguf", once, 5, 32, -1, 1e-3);
        compare_model(path, "synth-phi3-f16.gguf", longp, 100, 8, -1, 1e-3);
    }
    /* gemma3: its own builder (GELU, post norms, sliding window of 16 on 5 of every 6 blocks) */
    {
        synth_spec sp = {512, 256, 7, 4, 1, 512, LW_TYPE_F16, 1, 51, "gemma3", 0, 1, 0};
        synth_path(path, sizeof(path), "synth-gemma3-f16.gguf");
        CHECK_MSG(synth_write(path, &sp) == 0, "writing %s", path);
        compare_model(path, "synth-gemma3-f16.gguf", once, 5, 32, -1, 1e-3);
        compare_model(path, "synth-gemma3-f16.gguf", longp, 100, 8, -1, 1e-3);
    }
    /* llama 3 RoPE frequency factors (rope_freqs.weight, as llama-3.2-1b / llama-3.1-8b files have): made by
     * src/synth with an original context of 64 so that most of the 32 pairs of a 64-wide head get a factor
     * (8 for the slow ones, smoothed in between) and the angles of the first 100 positions really change */
    {
        lw__synth_preset rp = {.name = "oracle-llama3-rope", .arch = "llama", .n_embd = 256, .n_layer = 2,
                               .n_head = 4, .n_head_kv = 2, .n_ff = 512, .n_ctx_train = 2048, .rope_base = 10000.f,
                               .rms_eps = 1e-5f, .llama3_factor = 8.f, .llama3_low = 1.f, .llama3_high = 4.f,
                               .llama3_orig_ctx = 64};
        lw__synth_params sp = {.custom = &rp, .type = "f16", .vocab_path = "builtin", .seed = 61, .n_vocab = 512};
        char err[LW_ERRMSG_SIZE];
        synth_path(path, sizeof(path), "synth-llama3-rope-f16.gguf");
        CHECK_MSG(lw__synth_write(&sp, path, NULL, NULL, err) == LW_OK, "writing %s: %s", path, err);
        compare_model(path, "synth-llama3-rope-f16.gguf", once, 5, 32, -1, 1e-3);
        compare_model(path, "synth-llama3-rope-f16.gguf", longp, 100, 8, -1, 1e-3);
    }
    /* the models below are checked to the bit on the builds we reproduce exactly (what they test changes
     * the logits by far less than the usual 1e-3 of the range when left out or done slightly differently) */
    const double gtol = exact ? 1e-6 : 1e-3;
    /* YaRN RoPE scaling (qwen2-style NeoX RoPE and llama's normal RoPE) */
    for (int k = 0; k < 2; k++) {
        synth_spec sp = {512, 256, 2, 4, 2, 512, LW_TYPE_F16, 0, 81 + k, k ? "qwen2" : "llama", k, 0, 0};
        const char *name = k ? "synth-qwen2-yarn-f16.gguf" : "synth-llama-yarn-f16.gguf";
        synth_path(path, sizeof(path), name);
        synth_extra_keys = yarn_keys;
        CHECK_MSG(synth_write(path, &sp) == 0, "writing %s", path);
        synth_extra_keys = NULL;
        compare_model(path, name, once, 5, 32, -1, gtol);
        compare_model(path, name, longp, 100, 8, -1, gtol);
    }
    /* gemma2: the tiny-gemma2 preset of src/synth (sliding window of 16 on block 0, global block 1, post
     * norms, heads of 32 on a width of 64) with tighter soft-caps than its 50 (scores) and 30 (logits), so
     * that both really bend the values of random weights (leaving either cap out moves the logits by
     * 4e-4 .. 7e-3 of the range even with the preset's caps) */
    if (lw__synth_preset_find("tiny-gemma2")) {
        lw__synth_preset g2 = *lw__synth_preset_find("tiny-gemma2");
        g2.name = "oracle-gemma2";
        g2.attn_softcap = 2.0f;
        g2.final_softcap = 3.0f;
        lw__synth_params sp = {.custom = &g2, .type = "f16", .vocab_path = "builtin", .seed = 71, .n_vocab = 512};
        char err[LW_ERRMSG_SIZE];
        synth_path(path, sizeof(path), "synth-gemma2-f16.gguf");
        CHECK_MSG(lw__synth_write(&sp, path, NULL, NULL, err) == LW_OK, "writing %s: %s", path, err);
        compare_model(path, "synth-gemma2-f16.gguf", once, 5, 32, -1, gtol);
        compare_model(path, "synth-gemma2-f16.gguf", longp, 100, 8, -1, gtol);
    } else {
        CHECK_MSG(0, "src/synth has no tiny-gemma2 preset");
    }
    /* flash attention off in both (node-llama-cpp's flashAttention: false) */
    flash_attn = 0;
    printf("-- flash attention off --\n");
    snprintf(path, sizeof(path), "%s/models/stories260K.gguf", test_shared_dir());
    compare_model(path, "stories260K.gguf (no FA)", once, 5, 256, 432, 1e-3);
    synth_path(path, sizeof(path), "synth-f16-tied.gguf");
    compare_model(path, "synth-f16-tied.gguf (no FA)", once, 5, 32, -1, 1e-3);
    compare_model(path, "synth-f16-tied.gguf (no FA)", longp, 100, 8, -1, 1e-3);
    synth_path(path, sizeof(path), "synth-qwen3-f16.gguf");
    if (!light) compare_model(path, "synth-qwen3-f16.gguf (no FA)", longp, 100, 8, -1, 1e-3);
    synth_path(path, sizeof(path), "synth-gemma3-f16.gguf");
    compare_model(path, "synth-gemma3-f16.gguf (no FA)", longp, 100, 8, -1, 1e-3);
    synth_path(path, sizeof(path), "synth-gemma2-f16.gguf");
    compare_model(path, "synth-gemma2-f16.gguf (no FA)", once, 5, 16, -1, gtol);
    compare_model(path, "synth-gemma2-f16.gguf (no FA)", longp, 100, 8, -1, gtol);
    flash_attn = 1;

    /* quantized weights: quant-dot's emulations of ggml's x86 kernels, including the ones llama.cpp uses for
     * weights it repacks (Q4_0, Q4_K, Q2_K, IQ4_NL with rows % 8 == 0); the tied Q4_0 model keeps its
     * output projection plain (llama.cpp does not repack the embedding table); BF16 as the AVX512-BF16
     * builds run it (vdpbf16ps) */
    static const struct { uint32_t type; int tied; } qtypes[] = {
        {LW_TYPE_Q8_0, 0}, {LW_TYPE_Q4_0, 0}, {LW_TYPE_Q4_0, 1}, {LW_TYPE_Q4_1, 0}, {LW_TYPE_Q5_0, 0},
        {LW_TYPE_Q5_1, 0}, {LW_TYPE_Q2_K, 0}, {LW_TYPE_Q3_K, 0}, {LW_TYPE_Q4_K, 0}, {LW_TYPE_Q5_K, 0},
        {LW_TYPE_Q6_K, 0}, {LW_TYPE_IQ4_NL, 0}, {LW_TYPE_BF16, 0},
    };
    for (size_t k = 0; k < sizeof(qtypes) / sizeof(qtypes[0]); k++) {
        if (light && qtypes[k].type != LW_TYPE_Q8_0 && qtypes[k].type != LW_TYPE_Q4_K &&
            !(qtypes[k].type == LW_TYPE_Q4_0 && !qtypes[k].tied))
            continue;
        synth_spec sp = {512, 256, 2, 4, 2, 512, qtypes[k].type, qtypes[k].tied, 21 + k, NULL, 0, 0, 0};
        char name[64];
        snprintf(name, sizeof(name), "synth-%s%s.gguf", lw_type_get(qtypes[k].type)->name, qtypes[k].tied ? "-tied" : "");
        synth_path(path, sizeof(path), name);
        CHECK_MSG(synth_write(path, &sp) == 0, "writing %s", path);
        /* other builds: other dot orders and repacking; the fast decode kernels: their own float order */
        const double qtol = !exact ? 2e-2 : fast_decode() ? 1e-2 : 1e-3;
        compare_model(path, name, once, 5, 16, -1, qtol);
        compare_model(path, name, longp, 100, 4, -1, qtol);
    }
    /* ggml's GELU table (GeGLU in gemma3) against ours, for every f16 input geglu looks up (|x| < 10) */
    if (gelu_table) {
        int bad = 0, n = 0;
        for (uint32_t i = 0; i < 65536; i++) {
            const float x = lw__fp16_to_fp32((uint16_t)i);
            if (!(x > -10.0f && x < 10.0f)) continue;
            n++;
            bad += lw__fp32_to_fp16(lw__cpu_gelu_f16((uint16_t)i)) != gelu_table[i];
        }
        printf("GELU f16 table: %d of %d entries differ from ggml's\n", bad, n);
        CHECK(bad == 0);
    }
    return test_summary("test-oracle-llama");
}
