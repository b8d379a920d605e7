/* Attention kernel family without a GPU (src/webgpu/kernel-attn.c): a recording fake HAL checks what the
 * pipelines ask for (expanded WGSL per kernel and variant, one explicit layout, caching, refusals), and the
 * per-call planning is checked: grids, parameter block, split choice, sliding-window starts, and that the
 * scratch size reported for a model covers every decode call the plan accepts. The kernels themselves run
 * against the CPU engine on real WebGPU adapters in tests/web/attn.test.mjs. */
#include "gpu-fake.h"
#include "test.h"
#include "webgpu/gpu-tune.h"
#include "webgpu/gpu.h"
#include "webgpu/kernels-attn.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------------------------------------------------
 * Tests
 * ------------------------------------------------------------------------------------------------------- */

static void test_pipelines(void) {
    fake_gpu *f = calloc(1, sizeof *f);
    lw_gpu gpu = {&fake_ops, f};
    lw_gpu_info info = lavapipe_info();
    lw__gpu_pipeline_cache cache;
    lw__gpu_cache_init(&cache, NULL);
    char err[LW_ERRMSG_SIZE];
    static const char *const files[] = {"attn-decode", "attn-reduce", "attn-prefill", "attn-exact"};
    const uint32_t dims[] = {64, 80, 128, 256}, groups[] = {1, 2, 4, 7, 8, 16};
    for (int t = 0; t < 4; t++) /* f32, f16, q8_0, q4_0 caches */
        for (size_t di = 0; di < sizeof dims / sizeof dims[0]; di++)
            for (size_t gi = 0; gi < sizeof groups / sizeof groups[0]; gi++) {
                const bool f16 = t == 1, q8 = t == 2, q4 = t == 3;
                const uint32_t kv = q4    ? LW_TYPE_Q4_0
                                    : q8  ? LW_TYPE_Q8_0
                                    : f16 ? LW_TYPE_F16
                                          : LW_TYPE_F32,
                               D = dims[di], G = groups[gi];
                if ((q8 || q4) && D % 32) { /* a quantized head is whole blocks */
                    CHECK(!lw__gpu_attn_supported(kv, D, G));
                    continue;
                }
                CHECK(lw__gpu_attn_supported(kv, D, G));
                lw__gpu_attn_variant v = lw__gpu_attn_default(&info, kv, D, G);
                for (int k = 0; k < LW_GPU_ATTN_KERNELS; k++) {
                    CHECK_MSG(lw__gpu_attn_wg_bytes(&v, (lw__gpu_attn_kernel)k) <= 32768,
                              "D %u G %u kernel %d", D, G, k);
                    lw_gpu_pipeline p = 0;
                    const int before = f->creates;
                    lw_status st =
                        lw__gpu_attn_pipeline(&gpu, &cache, NULL, &v, (lw__gpu_attn_kernel)k, &info, &p, err);
                    /* f16: the CPU sums that tail in double; q8_0 / q4_0: EXACT does not follow the
                     * CPU's order */
                    if (k == LW_GPU_ATTN_EXACT && ((f16 && D % 64) || q8 || q4)) {
                        CHECK_MSG(st == LW_ERR_UNSUPPORTED && f->creates == before, "D %u: %s", D, err);
                        continue;
                    }
                    CHECK_MSG(st == LW_OK && p != 0, "D %u G %u kernel %d: %s", D, G, k, err);
                    CHECK(f->creates == before + 1);
                    CHECK(strncmp(f->label, files[k], strlen(files[k])) == 0);
                    /* one layout for the three kernels */
                    CHECK(f->n_kinds == LW_GPU_ATTN_BINDINGS && f->kinds[0] == LW_GPU_BIND_STORAGE &&
                          f->kinds[1] == LW_GPU_BIND_STORAGE && f->kinds[2] == LW_GPU_BIND_STORAGE &&
                          f->kinds[3] == LW_GPU_BIND_STORAGE && f->kinds[4] == LW_GPU_BIND_STORAGE &&
                          f->kinds[5] == LW_GPU_BIND_UNIFORM);
                    CHECK(strstr(f->wgsl, "var<storage, read>") == NULL);
                    /* the shader's constants are the variant's; no shader-f16 or subgroups needed */
                    CHECK(wgsl_const(f->wgsl, "D4") == (long)D / 4 && wgsl_const(f->wgsl, "G") == (long)G);
                    CHECK(wgsl_const(f->wgsl, "WG") == (long)(k == LW_GPU_ATTN_PREFILL ? v.pwg : v.wg_size));
                    CHECK(strstr(f->wgsl, "enable f16;") == NULL &&
                          strstr(f->wgsl, "enable subgroups;") == NULL);
                    CHECK((strstr(f->wgsl, "alias KvQuad = vec2<u32>;") != NULL) == (f16 || q8 || q4));
                    CHECK((strstr(f->wgsl, "alias KvWord = u32;") != NULL) == (q8 || q4));
                    if (q8 || q4) { /* blocks of 9 (Q8_0) or 5 (Q4_0) words per head */
                        char hw[64];
                        snprintf(hw, sizeof hw, "const HW: u32 = %u / 32 * %d;", D, q8 ? 9 : 5);
                        CHECK(strstr(f->wgsl, hw) != NULL);
                        CHECK(strstr(f->label, q8 ? " q8_0 " : " q4_0 ") != NULL);
                    }
                    if (k == LW_GPU_ATTN_DECODE) CHECK(wgsl_const(f->wgsl, "CH") == (long)v.chunk);
                    if (k == LW_GPU_ATTN_PREFILL)
                        CHECK(wgsl_const(f->wgsl, "TQ") == (long)v.bq &&
                              wgsl_const(f->wgsl, "TK") == (long)v.bk &&
                              wgsl_const(f->wgsl, "RQ") == (long)v.rq &&
                              wgsl_const(f->wgsl, "RK") == (long)v.rk);
                    /* a second request is answered by the cache */
                    lw_gpu_pipeline p2 = 0;
                    CHECK(lw__gpu_attn_pipeline(&gpu, &cache, NULL, &v, (lw__gpu_attn_kernel)k, &info, &p2,
                                                err) == LW_OK &&
                          p2 == p && f->creates == before + 1);
                }
            }
    /* refusals, before the HAL is asked */
    lw__gpu_attn_variant v = lw__gpu_attn_default(&info, LW_TYPE_F16, 128, 4);
    lw_gpu_pipeline p = 0;
    const int before = f->creates;
    v.wg_size = 48;
    CHECK(lw__gpu_attn_pipeline(&gpu, NULL, NULL, &v, LW_GPU_ATTN_DECODE, &info, &p, err) ==
          LW_ERR_INVALID_ARG);
    CHECK(strstr(err, "workgroup size 48") != NULL);
    v = lw__gpu_attn_default(&info, LW_TYPE_F16, 128, 4);
    v.chunk = 4096; /* 64 KiB of scores */
    CHECK(lw__gpu_attn_pipeline(&gpu, NULL, NULL, &v, LW_GPU_ATTN_DECODE, &info, &p, err) ==
          LW_ERR_INVALID_ARG);
    CHECK(strstr(err, "workgroup memory") != NULL);
    v = lw__gpu_attn_default(&info, LW_TYPE_F16, 128, 4);
    v.bq = 24;
    CHECK(lw__gpu_attn_pipeline(&gpu, NULL, NULL, &v, LW_GPU_ATTN_PREFILL, &info, &p, err) ==
          LW_ERR_INVALID_ARG);
    v.head_dim = 6;
    CHECK(lw__gpu_attn_pipeline(&gpu, NULL, NULL, &v, LW_GPU_ATTN_REDUCE, &info, &p, err) ==
          LW_ERR_UNSUPPORTED);
    /* a Q8_0 / Q4_0 cache: no RoPE prologue (it stores f16 / f32 cells) */
    v = lw__gpu_attn_default(&info, LW_TYPE_Q8_0, 128, 4);
    v.rope = true;
    CHECK(lw__gpu_attn_pipeline(&gpu, NULL, NULL, &v, LW_GPU_ATTN_DECODE, &info, &p, err) == LW_ERR_UNSUPPORTED);
    CHECK(strstr(err, "q8_0") != NULL);
    v = lw__gpu_attn_default(&info, LW_TYPE_Q4_0, 128, 4);
    v.rope = true;
    CHECK(lw__gpu_attn_pipeline(&gpu, NULL, NULL, &v, LW_GPU_ATTN_DECODE, &info, &p, err) ==
          LW_ERR_UNSUPPORTED);
    CHECK(strstr(err, "q4_0") != NULL);
    uint64_t cell = 0;
    CHECK(lw__gpu_kv_cell_bytes(LW_TYPE_Q8_0, 256, &cell) && cell == 8 * 36);
    CHECK(lw__gpu_kv_cell_bytes(LW_TYPE_Q4_0, 256, &cell) && cell == 8 * 20);
    CHECK(lw__gpu_kv_cell_bytes(LW_TYPE_F16, 256, &cell) && cell == 512);
    CHECK(!lw__gpu_kv_cell_bytes(LW_TYPE_Q8_0, 48, &cell) &&
          !lw__gpu_kv_cell_bytes(LW_TYPE_Q4_0, 48, &cell) &&
          !lw__gpu_kv_cell_bytes(LW_TYPE_Q5_0, 256, &cell) && cell == 0);
    CHECK(!lw__gpu_kv_cell_bytes(LW_TYPE_F32, UINT64_MAX / 2, &cell));
    /* the most whole blocks 64 bits hold: 36 bytes each overflow, 20 bytes each do not */
    CHECK(!lw__gpu_kv_cell_bytes(LW_TYPE_Q8_0, UINT64_MAX / 32 * 32, &cell));
    CHECK(lw__gpu_kv_cell_bytes(LW_TYPE_Q4_0, UINT64_MAX / 32 * 32, &cell) && cell == UINT64_MAX / 32 * 20);
    CHECK(lw__gpu_kv_block_words(LW_TYPE_Q8_0) == 9 && lw__gpu_kv_block_words(LW_TYPE_Q4_0) == 5 &&
          lw__gpu_kv_block_words(LW_TYPE_F16) == 0 && lw__gpu_kv_block_words(LW_TYPE_F32) == 0 &&
          lw__gpu_kv_block_words(LW_TYPE_Q4_1) == 0);
    CHECK(lw__gpu_attn_supported(LW_TYPE_Q4_0, 128, 1) && !lw__gpu_attn_supported(LW_TYPE_Q4_0, 80, 1) &&
          !lw__gpu_attn_supported(LW_TYPE_Q5_0, 128, 1) && !lw__gpu_attn_supported(LW_TYPE_F16, 512, 1) &&
          !lw__gpu_attn_supported(LW_TYPE_F16, 128, 0) && !lw__gpu_attn_supported(LW_TYPE_F16, 128, 32));
    CHECK(f->creates == before && p == 0);
    lw__gpu_cache_free(&cache);
    free(f);
}

/* Prefill defaults: CPU adapters keep the unblocked 16 x 32 tiles of 64 invocations; GPUs take 128
 * invocations in register blocks, the largest listed tile that fits their workgroup memory; refusals of
 * blocks that do not divide the tile. */
static void test_prefill_tiles(void) {
    char err[LW_ERRMSG_SIZE];
    lw_gpu_info cpu = lavapipe_info();
    strcpy(cpu.architecture, "llvmpipe");
    lw__gpu_attn_variant v = lw__gpu_attn_default(&cpu, LW_TYPE_F16, 64, 4);
    CHECK(v.pwg == 64 && v.bq == 16 && v.bk == 32 && v.rq == 1 && v.rk == 1 && v.wg_size == 64);
    lw_gpu_info h200 = lavapipe_info(); /* the limits of the H200 under Dawn (../TOOLCHAIN facts) */
    strcpy(h200.vendor, "nvidia");
    strcpy(h200.device, "nvidia-h200");
    h200.max_storage_buffer_binding_size = 2147483644u;
    h200.max_compute_workgroup_storage_size = 49152;
    h200.has_f16 = false;
    v = lw__gpu_attn_default(&h200, LW_TYPE_F16, 64, 4); /* llama-3.2-1b */
    CHECK(v.pwg == 128 && v.bq == 64 && v.bk == 32 && v.rq == 4 && v.rk == 4 && v.wg_size == 128);
    CHECK(lw__gpu_attn_wg_bytes(&v, LW_GPU_ATTN_PREFILL) <= 49152);
    v = lw__gpu_attn_default(&h200, LW_TYPE_F16, 128, 4); /* llama-3.1-8b: 64 x 32 would need 58 KiB */
    CHECK(v.pwg == 128 && v.bq == 64 && v.bk == 16 && v.rq == 4 && v.rk == 2);
    CHECK(lw__gpu_attn_wg_bytes(&v, LW_GPU_ATTN_PREFILL) <= 49152);
    v = lw__gpu_attn_default(&h200, LW_TYPE_F32, 256, 2); /* Gemma 2 */
    CHECK(lw__gpu_attn_wg_bytes(&v, LW_GPU_ATTN_PREFILL) <= 49152 && v.bq % v.rq == 0 && v.bk % v.rk == 0);
    /* every default fits and is accepted by the checks the pipeline applies */
    fake_gpu *f = calloc(1, sizeof *f);
    lw_gpu gpu = {&fake_ops, f};
    lw_gpu_pipeline p = 0;
    const uint32_t dims[] = {64, 80, 128, 256};
    for (size_t i = 0; i < 4; i++) {
        v = lw__gpu_attn_default(&h200, LW_TYPE_F16, dims[i], 8);
        CHECK_MSG(lw__gpu_attn_pipeline(&gpu, NULL, NULL, &v, LW_GPU_ATTN_PREFILL, &h200, &p, err) == LW_OK,
                  "D %u: %s", dims[i], err);
        CHECK(wgsl_const(f->wgsl, "RQ") == (long)v.rq && wgsl_const(f->wgsl, "RK") == (long)v.rk);
    }
    /* a GPU at WebGPU's default 16 KiB of workgroup memory gets smaller tiles that fit */
    lw_gpu_info small = h200;
    small.max_compute_workgroup_storage_size = 16384;
    for (size_t i = 0; i < 4; i++) {
        v = lw__gpu_attn_default(&small, LW_TYPE_F16, dims[i], 4);
        CHECK_MSG(lw__gpu_attn_pipeline(&gpu, NULL, NULL, &v, LW_GPU_ATTN_PREFILL, &small, &p, err) ==
                          LW_OK &&
                      lw__gpu_attn_wg_bytes(&v, LW_GPU_ATTN_PREFILL) <= 16384,
                  "D %u: %s", dims[i], err);
    }
    v = lw__gpu_attn_default(&h200, LW_TYPE_F16, 64, 4);
    v.rq = 3; /* does not divide 64 rows */
    CHECK(lw__gpu_attn_pipeline(&gpu, NULL, NULL, &v, LW_GPU_ATTN_PREFILL, &h200, &p, err) ==
              LW_ERR_INVALID_ARG &&
          strstr(err, "register blocks") != NULL);
    v.rq = 4;
    v.rk = 16; /* 64 scores per invocation is the most */
    CHECK(lw__gpu_attn_pipeline(&gpu, NULL, NULL, &v, LW_GPU_ATTN_PREFILL, &h200, &p, err) == LW_OK);
    v.rk = 32;
    CHECK(lw__gpu_attn_pipeline(&gpu, NULL, NULL, &v, LW_GPU_ATTN_PREFILL, &h200, &p, err) ==
          LW_ERR_INVALID_ARG);
    v = lw__gpu_attn_default(&h200, LW_TYPE_F16, 64, 4);
    v.bk = 30; /* scores are read in quads of cells */
    v.rk = 2;
    CHECK(lw__gpu_attn_pipeline(&gpu, NULL, NULL, &v, LW_GPU_ATTN_PREFILL, &h200, &p, err) ==
              LW_ERR_INVALID_ARG &&
          strstr(err, "multiple of 4") != NULL);
    free(f);
}

/* The "attn" tune keys reach the variant (by cache type, "*" for both), out-of-range values are refused,
 * and the JSON form carries them. */
static void test_tune(void) {
    char err[LW_ERRMSG_SIZE], json[512];
    lw_gpu_info h200 = lavapipe_info();
    strcpy(h200.vendor, "nvidia");
    h200.max_compute_workgroup_storage_size = 49152;
    lw__gpu_tune t;
    lw__gpu_tune_init(&t);
    const lw__gpu_attn_variant d = lw__gpu_attn_default(&h200, LW_TYPE_F16, 64, 4);
    lw__gpu_attn_variant v = lw__gpu_attn_tuned(&t, &h200, LW_TYPE_F16, 64, 4);
    CHECK(v.pwg == d.pwg && v.bq == d.bq && v.bk == d.bk && v.rq == d.rq && v.rk == d.rk);
    v = lw__gpu_attn_tuned(NULL, &h200, LW_TYPE_F16, 64, 4);
    CHECK(v.bq == d.bq && v.rk == d.rk);
    CHECK(lw__gpu_tune_set(&t, "attn.*.bq", 32, err) == LW_OK);
    CHECK(lw__gpu_tune_set(&t, "attn.*.pwg", 256, err) == LW_OK);
    CHECK(lw__gpu_tune_set(&t, "attn.f16.rq", 2, err) == LW_OK && lw__gpu_tune_get(&t, "attn.f16.rq") == 2);
    v = lw__gpu_attn_tuned(&t, &h200, LW_TYPE_F16, 64, 4);
    CHECK(v.pwg == 256 && v.bq == 32 && v.rq == 2 && v.bk == d.bk && v.rk == d.rk);
    v = lw__gpu_attn_tuned(&t, &h200, LW_TYPE_F32, 64, 4); /* the f16 entry is not f32's */
    CHECK(v.pwg == 256 && v.bq == 32 && v.rq == d.rq);
    CHECK(lw__gpu_tune_set(&t, "attn.*.bk", 30, err) == LW_ERR_INVALID_ARG && strstr(err, "multiple of 4"));
    CHECK(lw__gpu_tune_set(&t, "attn.*.pwg", 96, err) == LW_ERR_INVALID_ARG && strstr(err, "power of two"));
    CHECK(lw__gpu_tune_set(&t, "attn.*.tile", 64, err) == LW_ERR_INVALID_ARG); /* no such key */
    /* the decode kernel's own keys: its workgroup (a power of two) and cells per workgroup */
    CHECK(lw__gpu_tune_set(&t, "attn.*.wg", 96, err) == LW_ERR_INVALID_ARG && strstr(err, "power of two"));
    CHECK(lw__gpu_tune_set(&t, "attn.*.chunk", 16, err) == LW_ERR_INVALID_ARG);
    CHECK(lw__gpu_tune_set(&t, "attn.*.wg", 256, err) == LW_OK);
    CHECK(lw__gpu_tune_set(&t, "attn.*.chunk", 1024, err) == LW_OK);
    CHECK(lw__gpu_tune_set(&t, "attn.*.one", 1024, err) == LW_OK);
    v = lw__gpu_attn_tuned(&t, &h200, LW_TYPE_F16, 128, 4);
    CHECK(v.wg_size == 256 && v.chunk == 1024 && v.one_max == 1024);
    CHECK(lw__gpu_tune_to_json(&t, json, sizeof json) > 0 && strstr(json, "\"attn\":{") &&
          strstr(json, "\"rq\":2"));
    lw__gpu_tune u;
    lw__gpu_tune_init(&u);
    CHECK(lw__gpu_tune_json(&u, json, strlen(json), err) == LW_OK &&
          lw__gpu_tune_get(&u, "attn.*.bq") == 32 && lw__gpu_tune_get(&u, "attn.f16.rq") == 2);
    const char *bad = "{\"attn\": {\"f16\": {\"rk\": 17}}}";
    CHECK(lw__gpu_tune_json(&u, bad, strlen(bad), err) == LW_ERR_INVALID_ARG);
}

static void test_plan(void) {
    lw_gpu_info info = lavapipe_info();
    char err[LW_ERRMSG_SIZE];
    lw__gpu_attn_params p;
    lw__gpu_attn_dispatch d;
    /* a Llama-3-8B-like layer: 32 heads over 8 KV heads of 128, f16 cache of 4096 cells */
    lw__gpu_attn_variant v = lw__gpu_attn_default(&info, LW_TYPE_F16, 128, 4);
    uint64_t scratch;
    CHECK(lw__gpu_attn_scratch_bytes(&v, 32, 512, 4096, &scratch, err) == LW_OK);
    /* decode_max tokens x 32 heads x max(16 splits, 4096 / chunk) x (32 + 1) vec4s */
    const uint64_t max_splits = 4096 / v.chunk > v.splits ? 4096 / v.chunk : v.splits;
    CHECK(scratch == (uint64_t)v.decode_max * 32 * max_splits * 33 * 16);
    lw__gpu_attn_shape s = {.n_head = 32,
                            .n_head_kv = 8,
                            .n_tokens = 1,
                            .pos0 = 1000,
                            .n_ctx = 4096,
                            .scale = 0.125f,
                            .k_offset = 8 * 4096 * 128 * 2,
                            .v_offset = 0};
    CHECK(lw__gpu_attn_plan(&info, &v, &s, scratch, &p, &d, err) == LW_OK);
    /* 1001 cells aiming at 16 splits: 63 cells each is below the 64-cell minimum, so 64 -> 16 splits */
    CHECK(d.n == 2 && d.kernel[0] == LW_GPU_ATTN_DECODE && d.kernel[1] == LW_GPU_ATTN_REDUCE);
    CHECK(d.grid[0][0] == 16 && d.grid[0][1] == 8 && d.grid[0][2] == 1);
    CHECK(d.grid[1][0] == 32 && d.grid[1][1] == 1 && d.grid[1][2] == 1);
    CHECK(p.n_splits == 16 && p.chunk == 64 && p.base == 0 && p.n_tokens == 1 && p.pos0 == 1000 &&
          p.n_head == 32);
    CHECK(p.kv_stride == 8 * 32 && p.k_offset == 4096 * 8 * 32 && p.v_offset == 0); /* quads of 4 halves */
    CHECK(p.q_stride == 32 * 32 && p.o_stride == 32 * 32 && p.scale == 0.125f && p.softcap == 0.0f);
    /* a short context: one split, no reduce */
    s.pos0 = 20;
    CHECK(lw__gpu_attn_plan(&info, &v, &s, scratch, &p, &d, err) == LW_OK);
    CHECK(d.n == 1 && d.kernel[0] == LW_GPU_ATTN_DECODE && p.n_splits == 1 && d.grid[0][0] == 1);
    /* a sliding window: splits start at the window */
    s.pos0 = 3000;
    s.swa = 512;
    CHECK(lw__gpu_attn_plan(&info, &v, &s, scratch, &p, &d, err) == LW_OK);
    CHECK(p.base == 3001 - 512 && p.n_splits == 8 && p.chunk == 64 && p.swa == 512);
    /* a batch: prefill tiles of (token, head) rows of one KV head */
    s.n_tokens = 100;
    s.pos0 = 0;
    s.swa = 0;
    s.q_stride = 48 * 128; /* Q inside a fused QKV row */
    s.q_offset = 0;
    CHECK(lw__gpu_attn_plan(&info, &v, &s, 0, &p, &d, err) == LW_OK);
    CHECK(d.n == 1 && d.kernel[0] == LW_GPU_ATTN_PREFILL);
    CHECK(d.grid[0][0] == (100 * 4 + v.bq - 1) / v.bq && d.grid[0][1] == 8 && d.grid[0][2] == 1);
    CHECK(p.q_stride == 48 * 32 && p.o_stride == 32 * 32);

    /* refusals */
    s = (lw__gpu_attn_shape){.n_head = 32, .n_head_kv = 8, .n_tokens = 1, .pos0 = 1000, .n_ctx = 4096};
    lw__gpu_attn_shape b = s;
    b.n_head_kv = 16; /* groups of 2, not the variant's 4 */
    CHECK(lw__gpu_attn_plan(&info, &v, &b, scratch, &p, &d, err) == LW_ERR_INVALID_ARG);
    b = s;
    b.pos0 = 4096; /* past the cache */
    CHECK(lw__gpu_attn_plan(&info, &v, &b, scratch, &p, &d, err) == LW_ERR_INVALID_ARG);
    b = s;
    b.k_offset = 4; /* not a whole quad of halves */
    CHECK(lw__gpu_attn_plan(&info, &v, &b, scratch, &p, &d, err) == LW_ERR_INVALID_ARG);
    b = s;
    b.q_offset = 2;
    CHECK(lw__gpu_attn_plan(&info, &v, &b, scratch, &p, &d, err) == LW_ERR_INVALID_ARG);
    b = s;
    b.n_ctx = 70000; /* 70000 cells x 2 KiB > 128 MiB binding */
    CHECK(lw__gpu_attn_plan(&info, &v, &b, UINT64_MAX, &p, &d, err) == LW_ERR_TOO_LARGE);
    CHECK(strstr(err, "binding") != NULL);
    /* one token, 16 splits: 32 heads x 16 partials of 33 vec4s, not a byte less */
    CHECK(lw__gpu_attn_plan(&info, &v, &s, 32 * 16 * 33 * 16, &p, &d, err) == LW_OK && p.n_splits == 16);
    CHECK(lw__gpu_attn_plan(&info, &v, &s, 32 * 16 * 33 * 16 - 1, &p, &d, err) == LW_ERR_TOO_LARGE);
    CHECK(strstr(err, "scratch") != NULL);

    /* a Q4_0 cache: offsets and strides in words, 4 x 5 per head of 128 (a cell of 8 KV heads: 640 bytes) */
    v = lw__gpu_attn_default(&info, LW_TYPE_Q4_0, 128, 4);
    uint64_t cell = 0;
    CHECK(lw__gpu_kv_cell_bytes(LW_TYPE_Q4_0, 8 * 128, &cell) && cell == 640);
    s.k_offset = 4096 * cell;
    s.v_offset = 0;
    CHECK(lw__gpu_attn_plan(&info, &v, &s, scratch, &p, &d, err) == LW_OK);
    CHECK(p.kv_stride == 8 * 20 && p.k_offset == 4096 * 8 * 20 && d.n == 2);
    b = s;
    b.k_offset = 6; /* not a whole word */
    CHECK(lw__gpu_attn_plan(&info, &v, &b, scratch, &p, &d, err) == LW_ERR_INVALID_ARG);
    b = s;
    b.n_ctx = 210000; /* 210000 cells x 640 bytes > 128 MiB binding */
    CHECK(lw__gpu_attn_plan(&info, &v, &b, UINT64_MAX, &p, &d, err) == LW_ERR_TOO_LARGE);
}

/* Every decode call of up to max_tokens tokens the plan accepts fits the scratch it reported, whatever the
 * position, window and tunables. */
static void test_scratch_covers_every_call(void) {
    lw_gpu_info info = lavapipe_info();
    char err[LW_ERRMSG_SIZE];
    uint32_t seed = 12345;
    int calls = 0;
    for (int iter = 0; iter < 2000; iter++) {
        seed = seed * 1103515245u + 12345u;
        lw__gpu_attn_variant v = lw__gpu_attn_default(&info, LW_TYPE_F32, 64, 2);
        v.chunk = 32u << (seed >> 8) % 4;
        v.splits = (seed >> 12) % 3 == 0 ? 0 : 1 + (seed >> 14) % 40;
        v.min_chunk = 1 + (seed >> 3) % 96;
        v.decode_max = 1 + (seed >> 20) % 8;
        seed = seed * 1103515245u + 12345u;
        const uint64_t n_ctx = 1 + (seed >> 8) % 5000;
        const uint32_t n_tokens = 1 + (seed >> 4) % v.decode_max;
        if (n_tokens > n_ctx) continue;
        uint64_t scratch;
        CHECK(lw__gpu_attn_scratch_bytes(&v, 6, v.decode_max, n_ctx, &scratch, err) == LW_OK);
        seed = seed * 1103515245u + 12345u;
        lw__gpu_attn_shape s = {
            .n_head = 6, .n_head_kv = 3, .n_tokens = n_tokens, .n_ctx = n_ctx, .scale = 1.0f};
        s.pos0 = (uint32_t)((seed >> 8) % (n_ctx - n_tokens + 1));
        s.swa = (seed >> 3) % 4 ? 0 : 1 + (seed >> 10) % 700;
        lw__gpu_attn_params p;
        lw__gpu_attn_dispatch d;
        lw_status st = lw__gpu_attn_plan(&info, &v, &s, scratch, &p, &d, err);
        CHECK_MSG(st == LW_OK, "n_ctx %llu pos0 %u tokens %u swa %u chunk %u splits %u min %u: %s",
                  (unsigned long long)n_ctx, s.pos0, n_tokens, s.swa, v.chunk, v.splits, v.min_chunk, err);
        if (st != LW_OK) continue;
        calls++;
        /* the splits cover exactly the cells the tokens see, none wider than the kernel's chunk */
        const uint32_t nv0 = s.pos0 + 1, lo = s.swa && nv0 > s.swa ? nv0 - s.swa : 0;
        CHECK(p.base == lo && p.chunk >= 1 && p.chunk <= v.chunk);
        CHECK((uint64_t)p.n_splits * p.chunk >= s.pos0 + n_tokens - lo &&
              (uint64_t)(p.n_splits - 1) * p.chunk < s.pos0 + n_tokens - lo);
        CHECK(d.kernel[0] == LW_GPU_ATTN_DECODE && d.n == (p.n_splits > 1 ? 2u : 1u));
    }
    CHECK(calls > 1500);
}

int main(void) {
    test_pipelines();
    test_prefill_tiles();
    test_tune();
    test_plan();
    test_scratch_covers_every_call();
    return test_summary("test-wgsl-attn");
}
