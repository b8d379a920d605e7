/* Mat-mat kernel family and kernel tunables without a GPU: what the family asks the HAL for (expanded WGSL
 * per variant for every format of the GPU format table, explicit layout, refusals before the HAL), per-call
 * planning (parameter block, grid, offsets, strides, binding limits), and gpu-tune.c (keys, ranges, JSON in
 * and out, all-or-nothing, variants assembled from defaults + overrides and fitted to a device). The kernel
 * itself runs on real adapters in tests/web/matmat.test.mjs. */
#include "gpu-fake.h"
#include "test.h"
#include "webgpu/gpu-tune.h"
#include "webgpu/gpu.h"
#include "webgpu/kernels-matmat.h"

#include <stdio.h>
#include <string.h>

/* ---------------------------------------------------------------------------------------------------------
 * Variants and pipelines
 * ------------------------------------------------------------------------------------------------------- */

static void test_pipelines(void) {
    fake_gpu *f = calloc(1, sizeof *f);
    lw_gpu gpu = {&fake_ops, f};
    lw_gpu_info info = lavapipe_info();
    char err[LW_ERRMSG_SIZE];
    int n_formats = 0;
    /* every format of the table, both arithmetics */
    for (uint32_t type = 0; type < LW_TYPE_COUNT; type++) {
        const lw__gpu_format *fmt = lw__gpu_format_of(type);
        if (!fmt) continue;
        n_formats++;
        const lw_type_info *ti = lw_type_get(type);
        for (int v16 = 0; v16 < 2; v16++) {
            lw__gpu_matmat_variant v = lw__gpu_matmat_default(&info, type);
            if (v.idot)
                v = (lw__gpu_matmat_variant){type, false, 64,    64,    32, 4,
                                             4,    0,     false, false, 0}; /* the tile template */
            v.f16 = v16;
            lw_gpu_pipeline p = 0;
            int before = f->creates;
            lw_status st = lw__gpu_matmat_pipeline(&gpu, NULL, NULL, &v, &info, &p, err);
            CHECK_MSG(st == LW_OK && p != 0 && f->creates == before + 1, "%s f16=%d: %s", ti->name, v16, err);
            CHECK(f->n_kinds == LW_GPU_MATMAT_BINDINGS && f->kinds[0] == LW_GPU_BIND_STORAGE_READ &&
                  f->kinds[1] == LW_GPU_BIND_STORAGE_READ && f->kinds[2] == LW_GPU_BIND_STORAGE &&
                  f->kinds[3] == LW_GPU_BIND_UNIFORM);
            CHECK((strstr(f->wgsl, "enable f16;") != NULL) == v16);
            CHECK(strstr(f->wgsl, "enable subgroups;") == NULL);
            char wg[40];
            snprintf(wg, sizeof wg, "@workgroup_size(%u)", lw__gpu_matmat_wg_size(&v));
            CHECK_MSG(strstr(f->wgsl, wg) != NULL, "%s", wg);
            CHECK(strstr(f->wgsl, "fn dq_chunk(") != NULL && strstr(f->label, ti->name) != NULL);
            CHECK_MSG(wgsl_const(f->wgsl, "DQ_BLOCK") == (long)fmt->block &&
                          wgsl_const(f->wgsl, "DQ_BYTES") == (long)fmt->block_bytes,
                      "%s: shader block constants differ from the format table", ti->name);
        }
    }
    CHECK(n_formats >= 4);
    /* the tile defines reach the shader, and label = cache key tells variants apart */
    lw__gpu_matmat_variant v = {LW_TYPE_Q4_0, false, 48, 20, 24, 3, 5, 0, false, false, 0};
    lw_gpu_pipeline p;
    CHECK(lw__gpu_matmat_wg_size(&v) == 64);
    CHECK_MSG(lw__gpu_matmat_pipeline(&gpu, NULL, NULL, &v, &info, &p, err) == LW_OK, "%s", err);
    CHECK(strstr(f->wgsl, "@workgroup_size(64)") && strstr(f->wgsl, "array<f32, 3 * 5>") &&
          strstr(f->wgsl, "const CK: u32 = 24 / 8u;"));
    CHECK_MSG(strcmp(f->label, "matmat q4_0 t48x20x24 r3x5 a0") == 0, "%s", f->label);
    lw__gpu_pipeline_cache cache;
    lw__gpu_cache_init(&cache, NULL);
    lw_gpu_pipeline p1, p2;
    int before = f->creates;
    CHECK(lw__gpu_matmat_pipeline(&gpu, &cache, NULL, &v, &info, &p1, err) == LW_OK);
    CHECK(lw__gpu_matmat_pipeline(&gpu, &cache, NULL, &v, &info, &p2, err) == LW_OK);
    CHECK(p1 == p2 && f->creates == before + 1);
    lw__gpu_cache_free(&cache);

    /* refusals, before the HAL is asked */
    before = f->creates;
    lw_gpu_info ss = swiftshader_info();
    static const struct {
        lw__gpu_matmat_variant v;
        int swiftshader;
        lw_status st;
        const char *msg;
    } bad[] = {
        {{LW_TYPE_Q4_0, false, 64, 64, 12, 4, 4, 0, false, false, 0},
         0,
         LW_ERR_INVALID_ARG,
         "rules"}, /* tk % 8 */
        {{LW_TYPE_Q4_0, false, 64, 64, 0, 4, 4, 0, false, false, 0},
         0,
         LW_ERR_INVALID_ARG,
         "rules"}, /* tk 0 */
        {{LW_TYPE_Q4_0, false, 64, 60, 32, 4, 8, 0, false, false, 0},
         0,
         LW_ERR_INVALID_ARG,
         "rules"}, /* rn does not divide */
        {{LW_TYPE_Q4_0, false, 64, 64, 32, 0, 4, 0, false, false, 0},
         0,
         LW_ERR_INVALID_ARG,
         "rules"}, /* rm 0 */
        {{LW_TYPE_Q4_0, false, 512, 64, 32, 8, 4, 0, false, false, 0},
         0,
         LW_ERR_INVALID_ARG,
         "rules"}, /* tm > 256 */
        {{LW_TYPE_Q4_0, false, 64, 64, 32, 4, 17, 0, false, false, 0},
         0,
         LW_ERR_INVALID_ARG,
         "rules"}, /* rn > 16 */
        {{LW_TYPE_Q4_0, false, 256, 256, 32, 4, 4, 0, false, false, 0}, 0, LW_ERR_INVALID_ARG, "invocations"},
        {{LW_TYPE_Q4_0, false, 64, 128, 32, 4, 4, 0, false, false, 0},
         1,
         LW_ERR_INVALID_ARG,
         "invocations"}, /* 512 > 256 */
        {{LW_TYPE_Q4_0, false, 128, 128, 64, 8, 8, 0, false, false, 0},
         0,
         LW_ERR_INVALID_ARG,
         "workgroup memory"},
        {{LW_TYPE_Q4_0, true, 64, 64, 32, 4, 4, 0, false, false, 0}, 1, LW_ERR_UNSUPPORTED, "shader-f16"},
        {{4 /* no such type */, false, 64, 64, 32, 4, 4, 0, false, false, 0},
         0,
         LW_ERR_UNSUPPORTED,
         "no GPU kernel"},
        /* integer products: their formats, with 8-bit activations, f32 and whole 32-blocks per K step */
        {{LW_TYPE_Q4_K, false, 64, 64, 32, 4, 4, LW_GPU_ACTQ_Q8_K, true, false, 0},
         0,
         LW_ERR_INVALID_ARG,
         "integer"},
        {{LW_TYPE_Q2_K, false, 64, 64, 256, 4, 4, LW_GPU_ACTQ_Q8_K, true, false, 0},
         0,
         LW_ERR_INVALID_ARG,
         "integer"},
        {{LW_TYPE_Q8_0, false, 64, 64, 32, 4, 4, LW_GPU_ACTQ_Q8_K, true, false, 0},
         0,
         LW_ERR_INVALID_ARG,
         "activation"},
        {{LW_TYPE_Q4_0, false, 64, 64, 32, 4, 4, LW_GPU_ACTQ_NONE, true, false, 0},
         0,
         LW_ERR_INVALID_ARG,
         "integer"},
        {{LW_TYPE_Q4_0, false, 64, 64, 48, 4, 4, LW_GPU_ACTQ_Q8_0, true, false, 0},
         0,
         LW_ERR_INVALID_ARG,
         "integer"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        p = 9;
        lw_status st =
            lw__gpu_matmat_pipeline(&gpu, NULL, NULL, &bad[i].v, bad[i].swiftshader ? &ss : &info, &p, err);
        CHECK_MSG(st == bad[i].st && p == 0 && strstr(err, bad[i].msg), "case %zu: %d %s", i, (int)st, err);
    }
    CHECK(f->creates == before);
    /* integer products: matmat-q8.wgsl where WGSL has dot4I8Packed; its tiles are bytes */
    lw__gpu_matmat_variant q = {LW_TYPE_Q5_1, false, 64, 64, 64, 4, 4, LW_GPU_ACTQ_Q8_0, true, false, 0};
    CHECK_MSG(lw__gpu_matmat_pipeline(&gpu, NULL, NULL, &q, &info, &p, err) == LW_OK, "%s", err);
    CHECK(strstr(f->wgsl, "dot4I8Packed") && wgsl_const(f->wgsl, "DQI_SUBW") == 32);
    CHECK_MSG(strcmp(f->label, "matmat q5_1 t64x64x64 r4x4 a1 idot") == 0, "%s", f->label);
    CHECK(lw__gpu_matmat_wg_bytes(&q) == 128 * 17 * 4 + 64 * 2 * 2 * 8 + 64 * 2 * 8);
    lw__gpu_matmat_variant k6 = {LW_TYPE_Q6_K, false, 32, 32, 256, 2, 2, LW_GPU_ACTQ_Q8_K, true, false, 0};
    CHECK_MSG(lw__gpu_matmat_pipeline(&gpu, NULL, NULL, &k6, &info, &p, err) == LW_OK, "%s", err);
    CHECK(strstr(f->wgsl, "xbs[i] = sum;") && wgsl_const(f->wgsl, "DQI_SUBW") == 16);
    CHECK(lw__gpu_matmat_wg_bytes(&k6) == 64 * 65 * 4 + 32 * 17 * 8 + 32 * (8 + 16 * 4));
    lw_gpu_info no4 = info;
    no4.has_dot4 = false;
    CHECK(lw__gpu_matmat_check(&no4, &q, err) == LW_ERR_UNSUPPORTED && strstr(err, "dot4I8Packed"));
    CHECK(lw__gpu_matmat_has_idot(LW_TYPE_IQ4_NL) && lw__gpu_matmat_has_idot(LW_TYPE_Q4_K) &&
          !lw__gpu_matmat_has_idot(LW_TYPE_Q2_K));
    /* defaults: integer products on GPUs with dot4I8Packed for their formats (K steps of 128), not on CPU
     * adapters, not without dot4, not for other formats; a tune key turns them off */
    lw__gpu_matmat_variant d = lw__gpu_matmat_default(&info, LW_TYPE_Q8_0);
    CHECK(d.idot && d.tk == 128 && d.tm == 32 && d.rm == 2 && d.actq == LW_GPU_ACTQ_Q8_0 &&
          lw__gpu_matmat_check(&info, &d, err) == LW_OK);
    CHECK(!lw__gpu_matmat_default(&no4, LW_TYPE_Q8_0).idot &&
          !lw__gpu_matmat_default(&info, LW_TYPE_Q4_K).idot);
    lw_gpu_info cpu = info;
    strcpy(cpu.device, "llvmpipe (LLVM 19.1.7, 256 bits)");
    d = lw__gpu_matmat_default(&cpu, LW_TYPE_Q8_0);
    CHECK(!d.idot && d.rm == 8 && d.tk == 32);
    static lw__gpu_tune tn; /* 20 KiB: not on the stack */
    lw__gpu_tune_init(&tn);
    CHECK(lw__gpu_tune_set(&tn, "matmat.q8_0.idot", 0, err) == LW_OK);
    d = lw__gpu_matmat_tuned(&tn, &info, LW_TYPE_Q8_0);
    CHECK(!d.idot && d.tk == 32 && d.rm == 4);
    /* the matrix units: only on a device with i8 16 x 16 x 32 subgroup matrices and 32-wide subgroups, for
     * every quantized format (16-bit digits of X and W); on by default there, off with "smx": 0 */
    lw__gpu_matmat_variant sm = {LW_TYPE_Q4_K, false, 64, 64, 64, 2, 2, LW_GPU_ACTQ_NONE, false, true, 0};
    CHECK(lw__gpu_matmat_check(&info, &sm, err) == LW_ERR_UNSUPPORTED && strstr(err, "subgroup matrices"));
    CHECK(!lw__gpu_matmat_default(&info, LW_TYPE_Q4_0).smx);
    lw_gpu_info mx = info;
    mx.smx_m = mx.smx_n = 16, mx.smx_k = 32, mx.subgroup_min_size = mx.subgroup_max_size = 32;
    mx.max_compute_workgroup_storage_size = 49152; /* the H200's */
    CHECK(lw__gpu_matmat_default(&mx, LW_TYPE_Q4_0).smx);
    static lw__gpu_tune on; /* 20 KiB: not on the stack */
    lw__gpu_tune_init(&on);
    CHECK(lw__gpu_tune_set(&on, "matmat.*.smx", 1, err) == LW_OK);
    CHECK(!lw__gpu_matmat_tuned(&on, &mx, LW_TYPE_F16).smx); /* the float formats keep the float tiles */
    CHECK_MSG(lw__gpu_matmat_pipeline(&gpu, NULL, NULL, &sm, &mx, &p, err) == LW_OK, "%s", err);
    CHECK(strstr(f->wgsl, "subgroupMatrixMultiplyAccumulate") &&
          strstr(f->wgsl, "chromium_experimental_subgroup_matrix"));
    CHECK_MSG(strcmp(f->label, "matmat q4_K t64x64x64 r2x2 a0 smx") == 0, "%s", f->label);
    CHECK(lw__gpu_matmat_wg_size(&sm) == 128 && lw__gpu_matmat_wg_bytes(&sm) == 4 * (64 + 64) * 64);
    /* tile rows padded ("pad", words): its own pipeline, the padding in the workgroup bytes, multiples of 4
     * up to 16 only, and only for the matrix units */
    lw__gpu_matmat_variant sp = sm;
    sp.pad = 4;
    CHECK_MSG(lw__gpu_matmat_pipeline(&gpu, NULL, NULL, &sp, &mx, &p, err) == LW_OK, "%s", err);
    CHECK_MSG(strcmp(f->label, "matmat q4_K t64x64x64 r2x2 a0 smx p4") == 0, "%s", f->label);
    CHECK(strstr(f->wgsl, "WSP") && lw__gpu_matmat_wg_bytes(&sp) == 4 * (64 + 64) * (64 + 16));
    sp.pad = 2;
    CHECK(lw__gpu_matmat_check(&mx, &sp, err) == LW_ERR_INVALID_ARG && strstr(err, "padding"));
    sp.pad = 20;
    CHECK(lw__gpu_matmat_check(&mx, &sp, err) == LW_ERR_INVALID_ARG && strstr(err, "padding"));
    sp = sm, sp.smx = false, sp.pad = 4;
    CHECK(lw__gpu_matmat_check(&mx, &sp, err) == LW_ERR_INVALID_ARG && strstr(err, "padding"));
    CHECK(lw__gpu_tune_set(&on, "matmat.q4_K.pad", 4, err) == LW_OK &&
          lw__gpu_matmat_tuned(&on, &mx, LW_TYPE_Q4_K).pad == 4);
    CHECK(lw__gpu_tune_set(&on, "matmat.q4_K.pad", 6, err) != LW_OK);
    CHECK(lw__gpu_tune_set(&on, "matmat.q4_K.pad", 0, err) == LW_OK);
    sm.type = LW_TYPE_F16; /* no quantized blocks */
    CHECK(lw__gpu_matmat_check(&mx, &sm, err) == LW_ERR_INVALID_ARG && strstr(err, "subgroup matrices"));
    sm.type = LW_TYPE_Q4_0, sm.tn = 48; /* 48 is not a multiple of 16 x 2 */
    CHECK(lw__gpu_matmat_check(&mx, &sm, err) == LW_ERR_INVALID_ARG);
    d = lw__gpu_matmat_tuned(&on, &mx, LW_TYPE_Q4_0);
    CHECK(d.smx && !d.idot && d.actq == LW_GPU_ACTQ_NONE && d.tm == 128 && d.tn == 128 &&
          lw__gpu_matmat_check(&mx, &d, err) == LW_OK);
    CHECK(lw__gpu_matmat_tuned(&on, &mx, LW_TYPE_Q4_K).smx &&
          lw__gpu_matmat_tuned(&on, &mx, LW_TYPE_Q6_K).smx &&
          lw__gpu_matmat_tuned(&on, &mx, LW_TYPE_IQ2_XXS).smx);
    CHECK(!lw__gpu_matmat_tuned(&on, &info, LW_TYPE_Q4_0).smx); /* not without the device's support */
    CHECK(lw__gpu_tune_set(&on, "matmat.q4_0.smx", 0, err) == LW_OK);
    CHECK(!lw__gpu_matmat_tuned(&on, &mx, LW_TYPE_Q4_0).smx);
    /* its prep pass: digits of every token and row and their maxima in one buffer (X's planes of 48 tokens,
     * 37 + 67 maxima, then W's planes from a multiple of 4 words), refused for the float formats */
    lw__gpu_matmat_shape ps = {67, 512, 37, 0, 0, 0, 0, 0};
    lw__gpu_smx_prep_params pp;
    uint32_t pg[3];
    uint64_t pb = 0;
    CHECK(lw__gpu_smx_prep_bytes(512, 37, 67, &pb) == LW_OK &&
          pb == 4 * ((48 * 256 + 37 + 67 + 3) / 4 * 4 + 67 * 256));
    CHECK(lw__gpu_smx_prep_plan(&mx, LW_TYPE_Q4_0, &ps, 37, &pp, pg, err) == LW_OK && pp.tokens == 37 &&
          pp.t_total == 37 && pp.row_stride == 16 * 18 && pg[0] * pg[1] >= 37 + 17);
    CHECK(lw__gpu_smx_prep_plan(&mx, LW_TYPE_Q4_0, &ps, 0, &pp, pg, err) == LW_OK && pp.tokens == 0);
    CHECK(lw__gpu_smx_prep_plan(&mx, LW_TYPE_F16, &ps, 37, &pp, pg, err) == LW_ERR_UNSUPPORTED);
    ps.x_stride = 514; /* not a multiple of 4 */
    CHECK(lw__gpu_smx_prep_plan(&mx, LW_TYPE_Q4_0, &ps, 37, &pp, pg, err) == LW_ERR_INVALID_ARG);
    CHECK(lw__gpu_smx_prep_bytes(UINT64_MAX / 2, 4, 1, &pb) == LW_ERR_TOO_LARGE);
    /* the f16 tiles halve the workgroup memory: 128 x 128 x 64 fits in f16, not in f32 */
    lw__gpu_matmat_variant h = {LW_TYPE_Q8_0, true, 128, 128, 48, 8, 8, 0, false, false, 0};
    CHECK(lw__gpu_matmat_wg_bytes(&h) == 256 * 13 * 8);
    CHECK(lw__gpu_matmat_check(&info, &h, err) == LW_OK);
    h.f16 = false;
    CHECK(lw__gpu_matmat_check(&info, &h, err) == LW_ERR_INVALID_ARG);
    free(f);
}

/* ---------------------------------------------------------------------------------------------------------
 * Planning
 * ------------------------------------------------------------------------------------------------------- */

static void test_plan(void) {
    lw_gpu_info info = lavapipe_info();
    lw__gpu_matmat_variant v = {LW_TYPE_Q4_0, false, 64, 32, 32, 4, 4, 0, false, false, 0};
    lw__gpu_matmat_params p;
    uint32_t g[3];
    char err[LW_ERRMSG_SIZE];
    /* Q4_0 4096 x 1024 (576 bytes per row), 100 tokens: 64 row tiles x 4 token tiles */
    lw__gpu_matmat_shape s = {4096, 1024, 100, 256, 8, 0, 4, 0};
    CHECK_MSG(lw__gpu_matmat_plan(&info, &v, &s, &p, g, err) == LW_OK, "%s", err);
    CHECK(p.k == 1024 && p.rows == 4096 && p.tokens == 100 && p.row_stride == 576 && p.w_offset == 256 &&
          p.x_offset == 2 && p.x_stride == 256 && p.y_offset == 4 && p.y_stride == 4096 && p.groups_x == 64);
    CHECK(g[0] == 64 && g[1] == 1 && g[2] == 4);
    /* explicit strides; odd rows and tokens round up */
    s = (lw__gpu_matmat_shape){67, 96, 37, 2, 4, 100, 3, 72};
    CHECK_MSG(lw__gpu_matmat_plan(&info, &v, &s, &p, g, err) == LW_OK, "%s", err);
    CHECK(p.x_offset == 1 && p.x_stride == 25 && p.y_offset == 3 && p.y_stride == 72 && g[0] == 2 &&
          g[2] == 2);
    /* many row tiles fold over a second grid dimension */
    lw__gpu_matmat_variant one = {LW_TYPE_Q4_0, false, 1, 64, 32, 1, 4, 0, false, false, 0};
    s = (lw__gpu_matmat_shape){70000, 32, 8, 0, 0, 0, 0, 0};
    CHECK(lw__gpu_matmat_plan(&info, &one, &s, &p, g, err) == LW_OK && g[0] == 65535 && g[1] == 2 &&
          g[2] == 1 && p.groups_x == 65535);
    /* bad shapes */
    const lw__gpu_matmat_shape bad[] = {
        {4, 48, 2, 0, 0, 0, 0, 0},  /* k not a multiple of 32 */
        {0, 32, 2, 0, 0, 0, 0, 0},  /* no rows */
        {4, 32, 0, 0, 0, 0, 0, 0},  /* no tokens */
        {4, 32, 2, 1, 0, 0, 0, 0},  /* odd W offset */
        {4, 32, 2, 0, 2, 0, 0, 0},  /* X offset not a multiple of 4 */
        {4, 32, 2, 0, 0, 30, 0, 0}, /* X stride < k */
        {4, 32, 2, 0, 0, 34, 0, 0}, /* X stride not a multiple of 4 */
        {4, 32, 2, 0, 0, 0, 0, 3},  /* Y stride < rows */
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        CHECK_MSG(lw__gpu_matmat_plan(&info, &v, &bad[i], &p, g, err) == LW_ERR_INVALID_ARG, "case %zu", i);
    v.type = 4;
    s = (lw__gpu_matmat_shape){4, 32, 2, 0, 0, 0, 0, 0};
    CHECK(lw__gpu_matmat_plan(&info, &v, &s, &p, g, err) == LW_ERR_UNSUPPORTED);
    /* sizes: W within one binding (128 MiB here) and 4 GiB; X and Y too */
    v.type = LW_TYPE_F32;
    s = (lw__gpu_matmat_shape){8192, 4096, 1, 0, 0, 0, 0, 0};
    CHECK(lw__gpu_matmat_plan(&info, &v, &s, &p, g, err) == LW_OK); /* exactly 128 MiB */
    s.w_offset = 2;
    CHECK(lw__gpu_matmat_plan(&info, &v, &s, &p, g, err) == LW_ERR_TOO_LARGE && strstr(err, "one binding"));
    s = (lw__gpu_matmat_shape){16, 4096, 8193, 0, 0, 0, 0, 0}; /* X: 8193 x 4096 floats > 128 MiB */
    CHECK(lw__gpu_matmat_plan(&info, &v, &s, &p, g, err) == LW_ERR_TOO_LARGE && strstr(err, "tokens"));
    s = (lw__gpu_matmat_shape){16, 8, 1, 0, 0, 0, 33554432, 0}; /* Y past 128 MiB */
    CHECK(lw__gpu_matmat_plan(&info, &v, &s, &p, g, err) == LW_ERR_TOO_LARGE);
    info.max_storage_buffer_binding_size = 1ull << 40;
    s = (lw__gpu_matmat_shape){1 << 20, 1024, 1, 0, 0, 0, 0, 0}; /* 4 GiB of W: beyond u32 byte offsets */
    CHECK(lw__gpu_matmat_plan(&info, &v, &s, &p, g, err) == LW_ERR_TOO_LARGE);
    s = (lw__gpu_matmat_shape){UINT64_MAX, 1024, 1, 0, 0, 0, 0, 0};
    CHECK(lw__gpu_matmat_plan(&info, &v, &s, &p, g, err) == LW_ERR_TOO_LARGE);
    s = (lw__gpu_matmat_shape){4, 8, UINT64_MAX, 0, 0, 0, 0, 0};
    CHECK(lw__gpu_matmat_plan(&info, &v, &s, &p, g, err) == LW_ERR_TOO_LARGE);
    info = lavapipe_info();
    info.max_compute_workgroups_per_dimension = 4;
    s = (lw__gpu_matmat_shape){8, 8, 64 * 5, 0, 0, 0, 0, 0}; /* 5 token tiles > 4 */
    v = (lw__gpu_matmat_variant){LW_TYPE_F32, false, 64, 64, 32, 4, 4, 0, false, false, 0};
    CHECK(lw__gpu_matmat_plan(&info, &v, &s, &p, g, err) == LW_ERR_TOO_LARGE && strstr(err, "grid"));
}

/* ---------------------------------------------------------------------------------------------------------
 * Tunables
 * ------------------------------------------------------------------------------------------------------- */

static void test_tune_keys(void) {
    lw__gpu_tune t;
    lw__gpu_tune_init(&t);
    char err[LW_ERRMSG_SIZE];
    CHECK(lw__gpu_tune_get(&t, "matvec.q4_0.wg") == LW_GPU_TUNE_UNSET);
    CHECK(lw__gpu_tune_set(&t, "matvec.q4_0.wg", 128, err) == LW_OK);
    CHECK(lw__gpu_tune_get(&t, "matvec.Q4_0.WG") == 128);
    CHECK(lw__gpu_tune_set(&t, "matmat.*.tn", 32, err) == LW_OK && lw__gpu_tune_get(&t, "matmat.*.tn") == 32);
    CHECK(lw__gpu_tune_set(&t, "matmat.q8_0.tk", 48, err) == LW_OK);
    static const struct {
        const char *key;
        int64_t v;
        const char *msg;
    } bad[] = {
        {"matvec.q4_0.wg", 48, "power of two"},  {"matvec.q4_0.wg", 2048, "out of range"},
        {"matvec.q4_0.rows", 0, "out of range"}, {"matvec.q4_0.sg", 2, "out of range"},
        {"matmat.q4_0.tk", 12, "multiple of 8"}, {"matmat.q4_0.tm", 257, "out of range"},
        {"matmat.q4_0.wg", 64, "unknown key"},   {"matmul.q4_0.tm", 64, "unknown key"},
        {"matmat.q9_0.tm", 64, "unknown key"},   {"matmat.q4_0", 64, "unknown key"},
        {"matmat.q4_0.tm.x", 64, "unknown key"}, {"", 1, "unknown key"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        CHECK_MSG(lw__gpu_tune_set(&t, bad[i].key, bad[i].v, err) == LW_ERR_INVALID_ARG &&
                      strstr(err, bad[i].msg),
                  "%s = %lld: %s", bad[i].key, (long long)bad[i].v, err);
    CHECK(lw__gpu_tune_set(&t, NULL, 1, err) == LW_ERR_INVALID_ARG);
    CHECK(lw__gpu_tune_get(&t, "matvec.q4_0.wg") == 128); /* refused sets changed nothing */
    char json[1024];
    int n = lw__gpu_tune_to_json(&t, json, sizeof json);
    CHECK_MSG(
        n > 0 &&
            strcmp(
                json,
                "{\"matvec\":{\"q4_0\":{\"wg\":128}},\"matmat\":{\"q8_0\":{\"tk\":48},\"*\":{\"tn\":32}}}") ==
                0,
        "%s", json);
    CHECK(lw__gpu_tune_to_json(&t, json, 10) == -1);
    lw__gpu_tune e;
    lw__gpu_tune_init(&e);
    CHECK(lw__gpu_tune_to_json(&e, json, sizeof json) == 2 && strcmp(json, "{}") == 0);
}

static void test_tune_json(void) {
    lw__gpu_tune t, u;
    lw__gpu_tune_init(&t);
    char err[LW_ERRMSG_SIZE], out[1024];
    const char *j =
        " {\"matvec\": {\"*\": {\"sg\": false, \"f16\": true}, \"Q8_0\": {\"rows\": 4, \"blocks\": 1}},\n"
        "  \"matmat\": {\"q4_0\": {\"tm\": 32, \"tn\": 16, \"tk\": 64, \"rm\": 2, \"rn\": 4, \"f16\": 0}},"
        " \"matmat\": {}} ";
    CHECK_MSG(lw__gpu_tune_json(&t, j, strlen(j), err) == LW_OK, "%s", err);
    CHECK(lw__gpu_tune_get(&t, "matvec.*.sg") == 0 && lw__gpu_tune_get(&t, "matvec.*.f16") == 1 &&
          lw__gpu_tune_get(&t, "matvec.q8_0.rows") == 4 && lw__gpu_tune_get(&t, "matmat.q4_0.tk") == 64);
    /* round trip through the writer */
    CHECK(lw__gpu_tune_to_json(&t, out, sizeof out) > 0);
    lw__gpu_tune_init(&u);
    CHECK_MSG(lw__gpu_tune_json(&u, out, strlen(out), err) == LW_OK, "%s: %s", out, err);
    CHECK(memcmp(&t, &u, sizeof t) == 0);
    /* all or nothing: a bad document leaves t as it was */
    static const struct {
        const char *json, *msg;
    } bad[] = {
        {"", "expected '{'"},
        {"{\"matvec\": {\"q4_0\": {\"wg\": 64}}", "expected ',' or '}'"},
        {"{\"matvec\": {\"q4_0\": {\"wg\": 64}}} x", "trailing"},
        {"{\"matvec\": {\"q4_0\": {\"wg\": 64.5}}}", "integer"},
        {"{\"matvec\": {\"q4_0\": {\"wg\": \"64\"}}}", "integer"},
        {"{\"matvec\": {\"q4_0\": {\"wg\": 99999999999}}}", "too large"},
        {"{\"matvec\": {\"q4_0\": {\"wg\": 63}}}", "power of two"},
        {"{\"matvec\": {\"q4_0\": {\"rows\": 2, \"tm\": 4}}}", "unknown matvec key"},
        {"{\"matvec\": {\"q4_0\": 5}}", "expected '{'"},
        {"{\"mat\\\"vec\": {}}", "unexpected character"},
        {"{\"gemm\": {}}", "unknown family"},
        {"{\"matmat\": {\"q3_0\": {}}}", "unknown format"},
        {"{\"matmat\": {\"q4_0\": {\"tk\": -8}}}", "out of range"},
        {"{\"matmat\" {}}", "expected ':'"},
        {"{\"matmat\": {\"q4_0\": {\"tk\": 8,}}}", "expected a string"},
    };
    lw__gpu_tune_init(&u);
    CHECK(lw__gpu_tune_set(&u, "matvec.q4_0.wg", 256, err) == LW_OK);
    lw__gpu_tune keep = u;
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        lw_status st = lw__gpu_tune_json(&u, bad[i].json, strlen(bad[i].json), err);
        CHECK_MSG(st == LW_ERR_INVALID_ARG && strstr(err, bad[i].msg), "%s: %s", bad[i].json, err);
        CHECK(memcmp(&u, &keep, sizeof u) == 0);
    }
    CHECK(lw__gpu_tune_json(&u, NULL, 0, err) == LW_ERR_INVALID_ARG);
    /* the length bounds the text: what follows is not read */
    CHECK(lw__gpu_tune_json(&u, "{}garbage", 2, err) == LW_OK);
}

/* Field-wise equality (the structs have padding bytes that memcmp would compare). */
static bool same_mv(lw__gpu_matvec_variant a, lw__gpu_matvec_variant b) {
    return a.type == b.type && a.f16 == b.f16 && a.subgroups == b.subgroups && a.wg_size == b.wg_size &&
           a.rows == b.rows && a.blocks == b.blocks;
}
static bool same_mm(lw__gpu_matmat_variant a, lw__gpu_matmat_variant b) {
    return a.type == b.type && a.f16 == b.f16 && a.tm == b.tm && a.tn == b.tn && a.tk == b.tk &&
           a.rm == b.rm && a.rn == b.rn;
}

static void test_tune_variants(void) {
    lw_gpu_info lvp = lavapipe_info(), ss = swiftshader_info();
    lw__gpu_tune t;
    lw__gpu_tune_init(&t);
    char err[LW_ERRMSG_SIZE];
    /* no overrides: the defaults, device features applied; matvec's default function is the same */
    lw__gpu_matvec_variant a = lw__gpu_matvec_tuned(&t, &lvp, LW_TYPE_Q4_0),
                           b = lw__gpu_matvec_default(&lvp, LW_TYPE_Q4_0);
    CHECK(same_mv(a, b) && a.subgroups && a.type == LW_TYPE_Q4_0);
    CHECK(!lw__gpu_matvec_default(&ss, LW_TYPE_Q4_0).f16);
    /* f16 is opt-in (slower where measured); asked for, it is used where the device has it */
    CHECK(lw__gpu_tune_set(&t, "matvec.q4_0.f16", 1, err) == LW_OK &&
          lw__gpu_matvec_tuned(&t, &lvp, LW_TYPE_Q4_0).f16);
    lw__gpu_tune_init(&t);
    lw__gpu_matmat_variant m = lw__gpu_matmat_tuned(NULL, &ss, LW_TYPE_Q8_0),
                           d = lw__gpu_matmat_default(&ss, LW_TYPE_Q8_0);
    CHECK(same_mm(m, d) && !m.f16 && m.type == LW_TYPE_Q8_0);
    /* the defaults are valid variants on both adapters, for every format */
    for (uint32_t type = 0; type < LW_TYPE_COUNT; type++) {
        if (!lw__gpu_format_of(type)) continue;
        lw__gpu_matmat_variant x = lw__gpu_matmat_default(&lvp, type), y = lw__gpu_matmat_default(&ss, type);
        CHECK_MSG(lw__gpu_matmat_check(&lvp, &x, err) == LW_OK && lw__gpu_matmat_check(&ss, &y, err) == LW_OK,
                  "%s", err);
    }
    /* "*" then the format's own entry */
    CHECK(lw__gpu_tune_set(&t, "matmat.*.tn", 32, err) == LW_OK);
    CHECK(lw__gpu_tune_set(&t, "matmat.q4_0.tn", 16, err) == LW_OK);
    CHECK(lw__gpu_tune_set(&t, "matmat.*.f16", 1, err) == LW_OK);
    CHECK(lw__gpu_tune_set(&t, "matmat.q4_0.f16", 0, err) == LW_OK);
    CHECK(lw__gpu_tune_set(&t, "matvec.q8_0.rows", 2, err) == LW_OK);
    CHECK(lw__gpu_tune_set(&t, "matvec.*.sg", 0, err) == LW_OK);
    CHECK(lw__gpu_matmat_tuned(&t, &lvp, LW_TYPE_Q4_0).tn == 16 &&
          lw__gpu_matmat_tuned(&t, &lvp, LW_TYPE_Q8_0).tn == 32);
    CHECK(!lw__gpu_matmat_tuned(&t, &lvp, LW_TYPE_Q4_0).f16 &&
          lw__gpu_matmat_tuned(&t, &lvp, LW_TYPE_Q6_K).f16);
    CHECK(!lw__gpu_matmat_tuned(&t, &lvp, LW_TYPE_Q8_0).f16); /* integer products by default: f32 */
    CHECK(lw__gpu_matvec_tuned(&t, &lvp, LW_TYPE_Q8_0).rows == 2 &&
          lw__gpu_matvec_tuned(&t, &lvp, LW_TYPE_F16).rows == lw__gpu_matvec_default(&lvp, LW_TYPE_F16).rows);
    CHECK(!lw__gpu_matvec_tuned(&t, &lvp, LW_TYPE_F16).subgroups);
    /* f16 asked for where the device has none: f32 */
    lw__gpu_tune_init(&t);
    CHECK(lw__gpu_tune_set(&t, "matmat.*.f16", 1, err) == LW_OK &&
          lw__gpu_tune_set(&t, "matvec.*.f16", 1, err) == LW_OK);
    CHECK(!lw__gpu_matmat_tuned(&t, &ss, LW_TYPE_F32).f16 && !lw__gpu_matvec_tuned(&t, &ss, LW_TYPE_F32).f16);
    /* fitted to the device: 128 x 128 tiles of 4 x 4 are 1024 invocations, SwiftShader takes 256 */
    const char *big = "{\"matmat\":{\"*\":{\"tm\":128,\"tn\":128,\"tk\":32,\"rm\":4,\"rn\":4,\"f16\":0}}}";
    CHECK(lw__gpu_tune_json(&t, big, strlen(big), err) == LW_OK);
    lw__gpu_matmat_variant f = lw__gpu_matmat_tuned(&t, &ss, LW_TYPE_Q4_0);
    CHECK_MSG(lw__gpu_matmat_check(&ss, &f, err) == LW_OK && f.tm * f.tn == 64 * 64 && f.tk == 32,
              "%u x %u x %u: %s", f.tm, f.tn, f.tk, err);
    lw__gpu_matmat_variant l =
        lw__gpu_matmat_tuned(&t, &lvp, LW_TYPE_Q4_0); /* 1024 invocations, but 36 KiB > 32 */
    CHECK_MSG(lw__gpu_matmat_check(&lvp, &l, err) == LW_OK, "%u x %u x %u: %s", l.tm, l.tn, l.tk, err);
    /* matvec: 1024 invocations on SwiftShader become 256 */
    CHECK(lw__gpu_tune_set(&t, "matvec.*.wg", 1024, err) == LW_OK);
    CHECK(lw__gpu_matvec_tuned(&t, &ss, LW_TYPE_Q4_0).wg_size == 256 &&
          lw__gpu_matvec_tuned(&t, &lvp, LW_TYPE_Q4_0).wg_size == 1024);
    /* a combination that breaks the template's rules is kept, for the check to report */
    lw__gpu_tune_init(&t);
    CHECK(lw__gpu_tune_set(&t, "matmat.*.rn", 3, err) == LW_OK);
    lw__gpu_matmat_variant r = lw__gpu_matmat_tuned(&t, &lvp, LW_TYPE_Q4_0);
    CHECK(r.rn == 3 && lw__gpu_matmat_check(&lvp, &r, err) == LW_ERR_INVALID_ARG);
}

int main(void) {
    test_pipelines();
    test_plan();
    test_tune_keys();
    test_tune_json();
    test_tune_variants();
    return test_summary("test-gpu-matmat");
}
