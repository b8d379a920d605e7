/* Mixture of experts against llama.cpp itself (libllama v0.4.0, tests/oracle-compare.h; skipped with a
 * message when absent): qwen3moe files made by src/synth, compared at every prompt position and over greedy
 * runs:
 * - tiny-qwen3moe (the preset: width 64, 16 experts of which 4 per token, expert FFN 32) in f32, f16, bf16:
 *   a 5-token prompt then 256 greedy tokens (one-token steps: k experts' rows each), and a 100-token prompt
 *   (a 36-token step then a 64-token one: tokens grouped by expert, tiled products, the tiled attention);
 * - the same in quantized file types (llama.cpp's per-tensor mixes: q8_0, q4_0 with llama.cpp's repacked
 *   expert stacks, q4_k_m, mxfp4_moe), and a width-256 shape whose expert rows are whole 256-blocks so the
 *   K-quants and IQ4_XS run on experts (q2_k, q3_k, q4_k, q5_k, q6_k repacked or not, iq4_nl, iq4_xs).
 * On the ggml builds we reproduce to the bit (zen4 and the other AVX-512 ones, see oracle-compare.h) float
 * files must give identical logits, quantized ones within 1e-3 of the range (IQ4_XS, whose dot order here is
 * generic, 2e-2), at every position and step. With other builds (LW_ORACLE_CPU_VARIANT=haswell) float files
 * stay within 1e-3 and quantized ones within 2e-2 at 90 % of the positions and steps: their dot orders
 * differ in the last bits, which turns some near ties between two experts the other way. */
#include "oracle-compare.h"

int main(void) {
    const lw__synth_preset *tiny = oracle_begin("tiny-qwen3moe");
    if (!tiny) return test_summary("test-oracle-qwen3moe");
    const int32_t *once = oracle_once;
    int32_t longp[100];
    oracle_long_prompt(longp);
    const int light = getenv("LW_TEST_SANITIZED") != NULL; /* 3-10x slower: fewer files, same paths */
    /* quantized files decoded by the fast kernels (own float order) are compared as on other builds */
    const int qexact = exact && !fast_decode();
    const double ftol = exact ? 1e-6 : 1e-3, qtol = qexact ? 1e-3 : 2e-2;
    if (!exact) oracle_share = 0.9; /* other dot orders: some routing near-ties go the other way */
    char path[1024], file[96];

    /* float files: every product in ggml's orders, so the logits are llama.cpp's */
    static const char *const floats[] = {"f32", "f16", "bf16"};
    for (size_t i = 0; i < sizeof floats / sizeof floats[0]; i++) {
        if (light && i == 2) continue;
        snprintf(file, sizeof file, "synth-qwen3moe-%s.gguf", floats[i]);
        if (!oracle_synth(tiny, floats[i], 0, 91 + i, file, path, sizeof path)) continue;
        /* bf16 is exact only against the AVX512-BF16 builds (vdpbf16ps); others: the bound of the non-exact
         * quantized formats (their bf16 products round differently, not just in the last bit) */
        const int bf16_exact =
            cpu_variant && (!strcmp(cpu_variant, "zen4") || !strcmp(cpu_variant, "cooperlake"));
        const double tol = i == 2 && !bf16_exact ? 2e-2 : ftol;
        if (i == 2 && !bf16_exact) oracle_share = 0.9;
        compare_model(path, file, once, 5, i == 1 || !light ? 256 : 32, -1, tol);
        compare_model(path, file, longp, 100, 16, -1, tol);
        oracle_share = exact ? 1.0 : 0.9;
    }

    /* llama.cpp's mixes on the tiny shape (64-wide rows: K-quants fall back to 32-blocks there) */
    static const char *const mixes[] = {"q8_0", "q4_0", "q4_k_m", "mxfp4_moe"};
    oracle_share = qexact ? 1.0 : 0.9;
    for (size_t i = 0; i < sizeof mixes / sizeof mixes[0]; i++) {
        if (light && i >= 2) continue;
        snprintf(file, sizeof file, "synth-qwen3moe-%s.gguf", mixes[i]);
        if (!oracle_synth(tiny, mixes[i], 0, 101 + i, file, path, sizeof path)) continue;
        compare_model(path, file, once, 5, 32, -1, qtol);
        compare_model(path, file, longp, 100, 8, -1, qtol);
    }

    /* rows of 256 so every format runs on the experts themselves (expert FFN 256, width 256) */
    lw__synth_preset wide = *tiny;
    wide.name = "oracle-qwen3moe-256";
    wide.n_embd = 256;
    wide.head_dim = 64;
    wide.n_ff_exp = 256;
    wide.n_expert = 8;
    wide.n_expert_used = 2;
    /* IQ4_XS takes a generic dot order here, not ggml's x86 one: its products differ in the last bits, which
     * flips an activation's 8-bit rounding now and then (measured: 0.0148 of the range at worst, from
     * position 7 of the 100-token prompt on) */
    static const char *const pures[] = {"q2_k", "q3_k", "q4_k", "q5_k", "q6_k", "iq4_nl", "iq4_xs"};
    for (size_t i = 0; i < sizeof pures / sizeof pures[0]; i++) {
        if (light && i != 2) continue;
        const double tol = strcmp(pures[i], "iq4_xs") ? qtol : 2e-2;
        snprintf(file, sizeof file, "synth-qwen3moe-256-%s.gguf", pures[i]);
        if (!oracle_synth(&wide, pures[i], 1, 111 + i, file, path, sizeof path)) continue;
        compare_model(path, file, once, 5, 16, -1, tol);
        compare_model(path, file, longp, 100, 4, -1, tol);
    }

    oracle_share = exact ? 1.0 : 0.9;
    /* flash attention off in both: the classic attention path under the MoE blocks */
    flash_attn = 0;
    synth_path(path, sizeof path, "synth-qwen3moe-f16.gguf");
    compare_model(path, "synth-qwen3moe-f16.gguf (no FA)", longp, 100, 8, -1, ftol);
    flash_attn = 1;
    return test_summary("test-oracle-qwen3moe");
}
