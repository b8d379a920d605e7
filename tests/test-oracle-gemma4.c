/* Gemma 4 against llama.cpp itself (libllama v0.4.0, tests/oracle-compare.h; skipped with a message when
 * absent): gemma4 files made by src/synth, compared at every prompt position and over greedy runs:
 * - tiny-gemma4 (the preset, shaped as E2B: per-layer input, sliding blocks with heads of 32 and global ones
 *   of 64 with proportional RoPE, the last 3 of 6 blocks sharing KV, FFNs doubled there, layer output
 *   scales) in f32, f16, bf16: a 5-token prompt then 256 greedy tokens, and a 100-token prompt (a 36-token
 *   step then a 64-token one: the tiled kernels and the tiled attention, the window of 16 passed);
 * - the same in quantized file types (llama.cpp's mixes: q8_0, q4_0 with llama.cpp's repacked weights,
 *   q4_k_m, and q3_k_m whose attn_v rule counts only the blocks that have attn_v);
 * - a shape as the larger models build their attention (no per-layer input, no shared KV, global blocks
 *   without attn_v so V is K's projection, other KV head counts there: head_count_kv per block, FFN widths as
 *   one value), and a width-256 one whose rows are whole 256-blocks so the K-quants run on every matrix,
 *   in pure types whose tied head llama.cpp repacks (q4_k, q4_0, iq4_nl) and in llama.cpp's mixes;
 * - tiny-gemma4-moe (shaped as 26B-A4B: every block's dense FFN beside 16 experts of which 4 per token,
 *   fused gate|up expert stacks, per-expert down scales, K = V global blocks) in f32, f16, q8_0, q4_0 (its
 *   repacked experts), q4_k_m and mxfp4_moe;
 * - flash attention off in both engines (llama.cpp's KQ, softmax, KQV path).
 * On the ggml builds we reproduce to the bit (zen4 and the other AVX-512 ones, see oracle-compare.h) float
 * files must give identical logits, quantized ones within 1e-3 of the range (all are identical there, at
 * every position and step); with other builds (LW_ORACLE_CPU_VARIANT=haswell) f32 files within 1e-3, f16,
 * bf16 and quantized ones within 2e-2, at 90 % of the positions and steps (measured on haswell: f16 rows
 * rounded after products that differ in the last bits move some logits by 2-4e-3 of the range, and these
 * random models turn a few activations' roundings and expert near-ties the other way). */
#include "oracle-compare.h"

/* One compared file: a shape, a file type, and the greedy steps after each prompt. */
typedef struct run {
    const lw__synth_preset *p; /* shape                                                  */
    const char *tag;           /* file name part                                         */
    const char *type;          /* synth --type                                           */
    int pure;                  /* 1: that type for every matrix                          */
    int n_once, n_long;        /* greedy steps after the 5- and the 100-token prompt     */
    int quant;                 /* 1: quantized tolerance                                 */
    int light;                 /* 1: also run under the sanitizers                       */
} run;

int main(void) {
    const lw__synth_preset *tiny = oracle_begin("tiny-gemma4"),
                           *moe = lw__synth_preset_find("tiny-gemma4-moe");
    CHECK_MSG(moe != NULL, "src/synth has no tiny-gemma4-moe preset");
    if (!tiny || !moe) return test_summary("test-oracle-gemma4");
    int32_t longp[100];
    oracle_long_prompt(longp);
    const int light = getenv("LW_TEST_SANITIZED") != NULL; /* 3-10x slower: fewer files, same paths */
    /* quantized files decoded by the fast kernels (own float order) are compared as on other builds, with a
     * wider bound: gemma4's f16 GELU table lookups turn last-bit differences into steps of the table, and
     * its six-block random models amplify them (measured on zen4: up to 0.034 of the range at 3 of 16
     * greedy steps of synth-gemma4-256-q4_k, top-1 16/16; other files below 0.03); the same bound against
     * the other builds when the fast kernels run (measured on haswell: synth-gemma4-256-q4_k at 19 of 100
     * prompt positions and 2 of 4 greedy steps past 0.02, top-1 the same) */
    const int qexact = exact && !fast_decode();
    const double ftol = exact ? 1e-6 : 1e-3, qtol = qexact ? 1e-3 : exact || fast_decode() ? 5e-2 : 2e-2;
    /* bf16 is exact only against the AVX512-BF16 builds (vdpbf16ps) */
    const int bf16_exact =
        cpu_variant && (!strcmp(cpu_variant, "zen4") || !strcmp(cpu_variant, "cooperlake"));

    /* the larger models' attention: no per-layer input, no shared KV, K = V on global blocks with their own
     * KV head count, one FFN width, no soft-cap */
    lw__synth_preset kv = *tiny;
    kv.name = "oracle-gemma4-kv";
    kv.n_head_kv = 2;
    kv.n_head_kv_global = 1;
    kv.k_eq_v = 1;
    kv.n_kv_shared = 0;
    kv.n_embd_per_layer = 0;
    kv.double_wide_mlp = 0;
    kv.layer_scale = 0;
    kv.final_softcap = 0.f;
    /* rows of 256 so every format runs on the matrices themselves */
    lw__synth_preset wide = *tiny;
    wide.name = "oracle-gemma4-256";
    wide.n_embd = 256;
    wide.n_ff = 256;
    wide.n_embd_per_layer = 256;
    wide.head_dim = 256;
    wide.head_dim_swa = 128;
    wide.n_head = 2;

    const run runs[] = {
        /* float files: every product in ggml's orders, so the logits are llama.cpp's */
        {tiny, "", "f32", 0, 256, 16, 0, 1},
        {tiny, "", "f16", 0, 256, 16, 0, 1},
        {tiny, "", "bf16", 0, 256, 16, !bf16_exact, 0},
        /* llama.cpp's mixes on the tiny shape (64-wide rows: K-quants fall back to 32-blocks there) */
        {tiny, "", "q8_0", 0, 32, 8, 1, 1},
        {tiny, "", "q4_0", 0, 32, 8, 1, 1},
        {tiny, "", "q4_k_m", 0, 32, 8, 1, 0},
        {tiny, "", "q3_k_m", 0, 32, 8, 1, 0},
        {&kv, "kv-", "f16", 0, 64, 8, 0, 1},
        {&kv, "kv-", "q4_k_m", 0, 64, 8, 1, 0},
        {&wide, "256-", "q4_k", 1, 16, 4, 1, 1},
        {&wide, "256-", "q4_0", 1, 16, 4, 1, 0},
        {&wide, "256-", "iq4_nl", 1, 16, 4, 1, 0},
        {&wide, "256-", "q6_k", 1, 16, 4, 1, 0},
        {&wide, "256-", "q5_k_m", 0, 16, 4, 1, 0},
        /* the mixture of experts (26B-A4B's blocks): router on the normed block input, fused gate|up experts,
         * per-expert down scales, the dense FFN beside them */
        {moe, "moe-", "f32", 0, 256, 16, 0, 1},
        {moe, "moe-", "f16", 0, 64, 16, 0, 0},
        {moe, "moe-", "q8_0", 0, 32, 8, 1, 1},
        {moe, "moe-", "q4_0", 0, 32, 8, 1, 0},
        {moe, "moe-", "q4_k_m", 0, 32, 8, 1, 0},
        {moe, "moe-", "mxfp4_moe", 0, 32, 8, 1, 0},
    };
    char path[1024], file[96];
    for (size_t i = 0; i < sizeof runs / sizeof runs[0]; i++) {
        const run *r = &runs[i];
        if (light && !r->light) continue;
        snprintf(file, sizeof file, "synth-gemma4-%s%s.gguf", r->tag, r->type);
        if (!oracle_synth(r->p, r->type, r->pure, 71 + i, file, path, sizeof path)) continue;
        /* other builds: f16/bf16 rows round to halves after products that differ in the last bits, so
         * those files take the quantized bound there; f32 files keep the float one */
        const double tol = r->quant || (!exact && strcmp(r->type, "f32")) ? qtol : ftol;
        /* other builds' dot orders differ in the last bits, which these random six-block models amplify at
         * some positions (an activation's 8-bit rounding or a near tie between two experts flipping) */
        oracle_share = (r->quant ? qexact : exact) ? 1.0 : 0.9;
        compare_model(path, file, oracle_once, 5, light ? r->n_once / 8 : r->n_once, -1, tol);
        compare_model(path, file, longp, 100, r->n_long, -1, tol);
        oracle_share = 1.0;
    }

    /* flash attention off in both: the classic attention path over blocks of both head sizes */
    flash_attn = 0;
    oracle_share = exact ? 1.0 : 0.9;
    synth_path(path, sizeof path, "synth-gemma4-f16.gguf");
    compare_model(path, "synth-gemma4-f16.gguf (no FA)", longp, 100, 8, -1, exact ? ftol : qtol);
    flash_attn = 1;
    oracle_share = 1.0;
    return test_summary("test-oracle-gemma4");
}
