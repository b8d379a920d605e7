/* WebGPU kernel library without a GPU: a recording fake HAL (gpu.h) checks what the mat-vec family asks the
 * HAL for (expanded WGSL per variant, explicit layout, pipeline cache, feature checks, error propagation)
 * and that per-call planning (parameter block, dispatch grid, shape and size limits) is right. The kernels
 * themselves run on real WebGPU adapters in tests/web (scripts/test-webgpu.sh). */
#include "gpu-fake.h"
#include "test.h"
#include "webgpu/gpu.h"
#include "webgpu/kernels.h"
#include "webgpu/wgsl-pp.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------------------------------------------------
 * Tests
 * ------------------------------------------------------------------------------------------------------- */

static void test_variants(void) {
    fake_gpu f = {0};
    lw_gpu gpu = {&fake_ops, &f};
    lw_gpu_info info = lavapipe_info();
    char err[LW_ERRMSG_SIZE];
    const uint32_t types[] = {
        LW_TYPE_F32, LW_TYPE_F16, LW_TYPE_Q8_0, LW_TYPE_Q4_0, LW_TYPE_BF16, LW_TYPE_Q4_1, LW_TYPE_Q5_0,
        LW_TYPE_Q5_1, LW_TYPE_Q2_K, LW_TYPE_Q3_K, LW_TYPE_Q4_K, LW_TYPE_Q5_K, LW_TYPE_Q6_K, LW_TYPE_TQ1_0,
        LW_TYPE_TQ2_0, LW_TYPE_Q1_0, LW_TYPE_Q2_0,
        /* IQ and FP4 formats (grids generated from src/quant: test-wgsl-dequant.c) */
        LW_TYPE_IQ4_NL, LW_TYPE_IQ4_XS, LW_TYPE_MXFP4, LW_TYPE_NVFP4, LW_TYPE_IQ2_XXS, LW_TYPE_IQ2_XS,
        LW_TYPE_IQ2_S, LW_TYPE_IQ3_XXS, LW_TYPE_IQ3_S, LW_TYPE_IQ1_S, LW_TYPE_IQ1_M};
    for (size_t t = 0; t < sizeof types / sizeof types[0]; t++) {
        CHECK(lw__gpu_matvec_supported(types[t]));
        const lw_type_info *ti = lw_type_get(types[t]);
        for (int v16 = 0; v16 < 2; v16++)
            for (int sg = 0; sg < 2; sg++) {
                lw__gpu_matvec_variant v = {types[t], v16, sg,    128,   1,     sg != 0,
                                            0,        0,   false, false, false, false};
                lw_gpu_pipeline p = 0;
                int before = f.creates;
                lw_status st = lw__gpu_matvec_pipeline(&gpu, NULL, NULL, &v, &info, &p, err);
                CHECK_MSG(st == LW_OK && p != 0, "%s f16=%d sg=%d: %s", ti->name, v16, sg, err);
                CHECK(f.creates == before + 1);
                CHECK(strcmp(f.entry, "main") == 0);
                CHECK(f.n_kinds == 4 && f.kinds[0] == LW_GPU_BIND_STORAGE_READ &&
                      f.kinds[1] == LW_GPU_BIND_STORAGE_READ && f.kinds[2] == LW_GPU_BIND_STORAGE &&
                      f.kinds[3] == LW_GPU_BIND_UNIFORM);
                CHECK((strstr(f.wgsl, "enable f16;") != NULL) == v16);
                CHECK((strstr(f.wgsl, "enable subgroups;") != NULL) == sg);
                CHECK((strstr(f.wgsl, "subgroupAdd") != NULL) == sg);
                CHECK(strstr(f.wgsl, "@workgroup_size(128)") != NULL);
                CHECK((strstr(f.wgsl, "for (var c = 0u; c < DQ_CHUNKS; c++)") != NULL) == sg); /* BLOCKS=1 */
                CHECK(strstr(f.wgsl, v16 ? "alias ftype = f16;" : "alias ftype = f32;") != NULL);
                /* the shader's block constants agree with C's planning and with the format's block layout */
                long block = wgsl_const(f.wgsl, "DQ_BLOCK"), bytes = wgsl_const(f.wgsl, "DQ_BYTES");
                CHECK_MSG(block == (long)lw__gpu_matvec_block(types[t]), "%s: DQ_BLOCK %ld", ti->name, block);
                CHECK_MSG(block > 0 && bytes == block / (long)ti->block_size * (long)ti->type_size,
                          "%s: DQ_BYTES %ld", ti->name, bytes);
                CHECK(strstr(f.label, ti->name) != NULL);
            }
    }
    /* the CPU-order kernel (matvec-exact.wgsl): its formats expand, plain and with the GLU fold; others are
     * refused before the HAL is asked */
    for (size_t t = 0; t < sizeof types / sizeof types[0]; t++) {
        const lw_type_info *ti = lw_type_get(types[t]);
        const bool has = lw__gpu_matvec_has_exact(types[t], true);
        CHECK(has == (types[t] == LW_TYPE_TQ1_0 || types[t] == LW_TYPE_TQ2_0 || types[t] == LW_TYPE_IQ1_S ||
                      types[t] == LW_TYPE_IQ1_M || types[t] == LW_TYPE_Q2_K || types[t] == LW_TYPE_Q4_K ||
                      types[t] == LW_TYPE_IQ2_XXS || types[t] == LW_TYPE_IQ2_XS ||
                      types[t] == LW_TYPE_IQ2_S || types[t] == LW_TYPE_IQ3_XXS || types[t] == LW_TYPE_IQ3_S ||
                      types[t] == LW_TYPE_Q3_K || types[t] == LW_TYPE_Q5_K || types[t] == LW_TYPE_Q6_K));
        CHECK(lw__gpu_matvec_has_exact(types[t], false) ==
              (has && types[t] != LW_TYPE_Q2_K && types[t] != LW_TYPE_Q4_K));
        lw__gpu_matvec_variant v = {types[t], false, false, 64, 2, false, 0, 0, true, false, false, false};
        lw_gpu_pipeline p = 0;
        int before = f.creates;
        lw_status st = lw__gpu_matvec_pipeline(&gpu, NULL, NULL, &v, &info, &p, err);
        CHECK_MSG(has ? st == LW_OK && p != 0 : st == LW_ERR_UNSUPPORTED && f.creates == before,
                  "%s exact: %s", ti->name, err);
        if (!has) continue;
        CHECK(strstr(f.wgsl, "atomicAdd(&sums") != NULL && strstr(f.label, "matvec-exact") != NULL);
        CHECK(f.n_kinds == 4);
        st = lw__gpu_matvec_glu_pipeline(&gpu, NULL, NULL, &v, LW_GPU_GLU_GELU, &info, &p, err);
        CHECK_MSG(st == LW_OK && f.n_kinds == 5 && strstr(f.wgsl, "gelu_table") != NULL, "%s exact geglu: %s",
                  ti->name, err);
    }
    /* features the device lacks are refused before the HAL is asked */
    lw_gpu_info ss = swiftshader_info();
    lw__gpu_matvec_variant v = {LW_TYPE_Q4_0, true, false, 64, 1, false, 0, 0, false, false, false, false};
    lw_gpu_pipeline p = 7;
    int before = f.creates;
    CHECK(lw__gpu_matvec_pipeline(&gpu, NULL, NULL, &v, &ss, &p, err) == LW_ERR_UNSUPPORTED && p == 0);
    CHECK(strstr(err, "shader-f16") != NULL);
    lw__gpu_matvec_variant d = lw__gpu_matvec_default(&ss, LW_TYPE_Q4_0);
    CHECK(!d.f16 && d.subgroups && d.wg_size == 128);
    CHECK(lw__gpu_matvec_pipeline(&gpu, NULL, NULL, &d, &ss, &p, err) == LW_OK);
    ss.has_subgroups = false;
    CHECK(lw__gpu_matvec_pipeline(&gpu, NULL, NULL, &d, &ss, &p, err) == LW_ERR_UNSUPPORTED);
    /* workgroup sizes: powers of two within the device's limits */
    lw__gpu_matvec_variant w = {LW_TYPE_Q8_0, false, false, 48, 1, false, 0, 0, false, false, false, false};
    CHECK(lw__gpu_matvec_pipeline(&gpu, NULL, NULL, &w, &info, &p, err) == LW_ERR_INVALID_ARG);
    w.wg_size = 0;
    CHECK(lw__gpu_matvec_pipeline(&gpu, NULL, NULL, &w, &info, &p, err) == LW_ERR_INVALID_ARG);
    w.wg_size = 512;
    CHECK(lw__gpu_matvec_pipeline(&gpu, NULL, NULL, &w, &info, &p, err) == LW_OK);
    CHECK(lw__gpu_matvec_pipeline(&gpu, NULL, NULL, &w, &ss, &p, err) ==
          LW_ERR_INVALID_ARG); /* 256 max there */
    /* rows per workgroup: 1..16, and their reduction buffer must fit workgroup memory */
    lw__gpu_matvec_variant r = {LW_TYPE_Q4_0, false, true, 256, 4, false, 0, 0, false, false, false, false};
    CHECK(lw__gpu_matvec_pipeline(&gpu, NULL, NULL, &r, &info, &p, err) == LW_OK);
    CHECK(strstr(f.wgsl, "array<f32, 256 * 4>") != NULL && strstr(f.label, "r4") != NULL);
    r.rows = 17;
    CHECK(lw__gpu_matvec_pipeline(&gpu, NULL, NULL, &r, &info, &p, err) == LW_ERR_INVALID_ARG);
    r.rows = 0;
    CHECK(lw__gpu_matvec_pipeline(&gpu, NULL, NULL, &r, &info, &p, err) == LW_ERR_INVALID_ARG);
    r.rows = 16;
    r.wg_size = 1024; /* 64 KiB of partial sums > 32 KiB */
    CHECK(lw__gpu_matvec_pipeline(&gpu, NULL, NULL, &r, &info, &p, err) == LW_ERR_INVALID_ARG);
    /* formats without a dequantization routine */
    lw__gpu_matvec_variant q6 = {LW_TYPE_Q8_K, false, false, 64,   1, false, 0, 0,
                                 false,        false, false, false}; /* an activation-only format */
    CHECK(!lw__gpu_matvec_supported(LW_TYPE_Q8_K) && lw__gpu_matvec_block(LW_TYPE_Q8_K) == 0);
    CHECK(lw__gpu_matvec_pipeline(&gpu, NULL, NULL, &q6, &info, &p, err) == LW_ERR_UNSUPPORTED);
    CHECK(f.creates == before + 3); /* only the three valid requests reached the HAL */
}

static void test_cache_and_errors(void) {
    fake_gpu f = {0};
    lw_gpu gpu = {&fake_ops, &f};
    lw_gpu_info info = lavapipe_info();
    lw__gpu_pipeline_cache cache;
    lw__gpu_cache_init(&cache, NULL);
    char err[LW_ERRMSG_SIZE];
    lw__gpu_matvec_variant a = {LW_TYPE_Q4_0, true, true, 64, 1, false, 0, 0, false, false, false, false},
                           b = {LW_TYPE_Q4_0, false, true, 64, 1, false, 0, 0, false, false, false, false};
    lw_gpu_pipeline p1 = 0, p2 = 0, p3 = 0;
    CHECK(lw__gpu_matvec_pipeline(&gpu, &cache, NULL, &a, &info, &p1, err) == LW_OK);
    CHECK(lw__gpu_matvec_pipeline(&gpu, &cache, NULL, &a, &info, &p2, err) == LW_OK);
    CHECK(lw__gpu_matvec_pipeline(&gpu, &cache, NULL, &b, &info, &p3, err) == LW_OK);
    CHECK(p1 != 0 && p1 == p2 && p3 != p1);
    CHECK(f.creates == 2 && cache.hits == 1 && cache.misses == 2 && cache.n == 2);
    /* a failed creation reports the HAL's message and caches nothing */
    f.fail_create = 1;
    lw__gpu_matvec_variant c = {LW_TYPE_Q8_0, false, false, 64, 1, false, 0, 0, false, false, false, false};
    CHECK(lw__gpu_matvec_pipeline(&gpu, &cache, NULL, &c, &info, &p1, err) == LW_ERR_INVALID_ARG && p1 == 0);
    CHECK_MSG(strstr(err, "expected ';'") && strstr(err, "matvec q8_0"), "%s", err);
    CHECK(cache.n == 2);
    CHECK(lw__gpu_cache_add(&cache, "0123456789012345678901234567890123456789012345678901234567890123", 5) ==
          LW_ERR_INVALID_ARG);
    CHECK(lw__gpu_cache_add(&cache, "k", 0) == LW_ERR_INVALID_ARG);
    for (int i = 0; i < 40; i++) { /* growth */
        char key[16];
        snprintf(key, sizeof key, "k%d", i);
        CHECK(lw__gpu_cache_add(&cache, key, (lw_gpu_pipeline)(1000 + i)) == LW_OK);
    }
    CHECK(lw__gpu_cache_find(&cache, "k39") == 1039 && lw__gpu_cache_find(&cache, "k40") == 0);
    lw__gpu_cache_free(&cache);
}

/* A variant of type with one row per workgroup (planning only looks at type and rows). */
#define VT(type)                                                                                             \
    (&(lw__gpu_matvec_variant){(type), false, false, 64, 1, false, 0, 0, false, false, false, false})

static void test_plan(void) {
    lw_gpu_info info = lavapipe_info();
    lw__gpu_matvec_params p;
    uint32_t g[3];
    char err[LW_ERRMSG_SIZE];
    /* Q4_0 4096 x 1024: 32 blocks of 18 bytes per row */
    CHECK(lw__gpu_matvec_plan(&info, VT(LW_TYPE_Q4_0), 4096, 1024, 256, 8, 4, &p, g, err) == LW_OK);
    CHECK(p.k == 1024 && p.rows == 4096 && p.row_stride == 576 && p.w_offset == 256 && p.x_offset == 2 &&
          p.y_offset == 4 && p.groups_x == 4096 && g[0] == 4096 && g[1] == 1 && g[2] == 1);
    CHECK(lw__gpu_matvec_plan(&info, VT(LW_TYPE_F16), 3, 24, 0, 0, 0, &p, g, err) == LW_OK &&
          p.row_stride == 48);
    CHECK(lw__gpu_matvec_plan(&info, VT(LW_TYPE_Q8_0), 1, 64, 0, 0, 0, &p, g, err) == LW_OK &&
          p.row_stride == 68);
    /* a second grid dimension past maxComputeWorkgroupsPerDimension */
    CHECK(lw__gpu_matvec_plan(&info, VT(LW_TYPE_Q4_0), 70000, 32, 0, 0, 0, &p, g, err) == LW_OK);
    CHECK(g[0] == 65535 && g[1] == 2 && p.groups_x == 65535);
    info.max_compute_workgroups_per_dimension = 4;
    CHECK(lw__gpu_matvec_plan(&info, VT(LW_TYPE_Q4_0), 16, 32, 0, 0, 0, &p, g, err) == LW_OK && g[0] == 4 &&
          g[1] == 4);
    CHECK(lw__gpu_matvec_plan(&info, VT(LW_TYPE_Q4_0), 17, 32, 0, 0, 0, &p, g, err) == LW_ERR_TOO_LARGE);
    info = lavapipe_info();
    /* several rows per workgroup: ceil(rows / R) workgroups, the grid split as before */
    lw__gpu_matvec_variant r4 = {LW_TYPE_Q4_0, false, false, 64, 4, false, 0, 0, false, false, false, false};
    CHECK(lw__gpu_matvec_plan(&info, &r4, 4097, 32, 0, 0, 0, &p, g, err) == LW_OK && g[0] == 1025 &&
          g[1] == 1 && p.rows == 4097 && p.groups_x == 1025);
    CHECK(lw__gpu_matvec_plan(&info, &r4, 4 * 65535 + 1, 32, 0, 0, 0, &p, g, err) == LW_OK && g[0] == 65535 &&
          g[1] == 2);
    r4.rows = 0;
    CHECK(lw__gpu_matvec_plan(&info, &r4, 4, 32, 0, 0, 0, &p, g, err) == LW_ERR_INVALID_ARG);
    r4.rows = 17;
    CHECK(lw__gpu_matvec_plan(&info, &r4, 4, 32, 0, 0, 0, &p, g, err) == LW_ERR_INVALID_ARG);
    /* shapes */
    CHECK(lw__gpu_matvec_plan(&info, VT(LW_TYPE_Q4_0), 4, 48, 0, 0, 0, &p, g, err) == LW_ERR_INVALID_ARG);
    CHECK(strstr(err, "multiple of 32") != NULL);
    /* f32/f16 rows need only a multiple of 4 (the kernel zeroes x past k in a partial block of 8) */
    CHECK(lw__gpu_matvec_plan(&info, VT(LW_TYPE_F32), 4, 12, 0, 0, 0, &p, g, err) == LW_OK &&
          p.row_stride == 48);
    CHECK(lw__gpu_matvec_plan(&info, VT(LW_TYPE_F32), 4, 10, 0, 0, 0, &p, g, err) == LW_ERR_INVALID_ARG);
    CHECK(lw__gpu_matvec_plan(&info, VT(LW_TYPE_F32), 0, 8, 0, 0, 0, &p, g, err) == LW_ERR_INVALID_ARG);
    CHECK(lw__gpu_matvec_plan(&info, VT(LW_TYPE_F32), 4, 0, 0, 0, 0, &p, g, err) == LW_ERR_INVALID_ARG);
    CHECK(lw__gpu_matvec_plan(&info, VT(LW_TYPE_Q4_0), 4, 32, 3, 0, 0, &p, g, err) == LW_ERR_INVALID_ARG);
    CHECK(lw__gpu_matvec_plan(&info, VT(LW_TYPE_Q4_0), 4, 32, 0, 2, 0, &p, g, err) == LW_ERR_INVALID_ARG);
    CHECK(lw__gpu_matvec_plan(&info, VT(LW_TYPE_Q8_K), 4, 256, 0, 0, 0, &p, g, err) == LW_ERR_UNSUPPORTED);
    /* sizes: one binding (128 MiB here), 32-bit byte offsets in the shader, 32-bit rows */
    CHECK(lw__gpu_matvec_plan(&info, VT(LW_TYPE_F32), 8192, 4096, 0, 0, 0, &p, g, err) ==
          LW_OK); /* exactly 128 MiB */
    CHECK(lw__gpu_matvec_plan(&info, VT(LW_TYPE_F32), 8192, 4096, 2, 0, 0, &p, g, err) == LW_ERR_TOO_LARGE);
    CHECK(lw__gpu_matvec_plan(&info, VT(LW_TYPE_F32), 8193, 4096, 0, 0, 0, &p, g, err) == LW_ERR_TOO_LARGE);
    info.max_storage_buffer_binding_size = 1ull << 40;
    CHECK(lw__gpu_matvec_plan(&info, VT(LW_TYPE_F32), 1 << 20, 1024, 0, 0, 0, &p, g, err) ==
          LW_ERR_TOO_LARGE); /* 4 GiB */
    CHECK(lw__gpu_matvec_plan(&info, VT(LW_TYPE_F32), UINT64_MAX, 1024, 0, 0, 0, &p, g, err) ==
          LW_ERR_TOO_LARGE);
    CHECK(lw__gpu_matvec_plan(&info, VT(LW_TYPE_F32), 4, UINT64_MAX - 7, 0, 0, 0, &p, g, err) ==
          LW_ERR_TOO_LARGE);
    CHECK(lw__gpu_matvec_plan(&info, VT(LW_TYPE_Q4_0), 4, 32, 0, 0, UINT32_MAX - 2, &p, g, err) ==
          LW_ERR_TOO_LARGE);
}

/* Failing allocator: the template expansion's allocations fail cleanly and nothing reaches the HAL. */
typedef struct failing {
    int countdown; /* calls left before failing; < 0: never */
    int calls;     /* calls made                            */
} failing;
static void *fa_malloc(void *u, size_t n) {
    failing *f = u;
    f->calls++;
    return f->countdown >= 0 && f->countdown-- == 0 ? NULL : malloc(n);
}
static void *fa_realloc(void *u, void *p, size_t n) {
    failing *f = u;
    f->calls++;
    return f->countdown >= 0 && f->countdown-- == 0 ? NULL : realloc(p, n);
}
static void fa_free(void *u, void *p) {
    (void)u;
    free(p);
}

static void test_alloc_failures(void) {
    fake_gpu f = {0};
    lw_gpu gpu = {&fake_ops, &f};
    lw_gpu_info info = lavapipe_info();
    failing fl = {-1, 0};
    lw_allocator a = {fa_malloc, fa_realloc, fa_free, &fl};
    lw__gpu_matvec_variant v = {LW_TYPE_Q4_0, true, true, 64, 1, false, 0, 0, false, false, false, false};
    lw_gpu_pipeline p;
    char err[LW_ERRMSG_SIZE];
    CHECK(lw__gpu_matvec_pipeline(&gpu, NULL, &a, &v, &info, &p, err) == LW_OK);
    int total = fl.calls, nomem = 0;
    CHECK(total > 3);
    for (int i = 0; i < total; i++) {
        fl = (failing){i, 0};
        f.creates = 0;
        lw_status st = lw__gpu_matvec_pipeline(&gpu, NULL, &a, &v, &info, &p, err);
        nomem += st == LW_ERR_NOMEM && f.creates == 0;
    }
    CHECK_MSG(nomem == total, "%d of %d", nomem, total);
}

int main(void) {
    test_variants();
    test_cache_and_errors();
    test_plan();
    test_alloc_failures();
    return test_summary("test-wgsl-kernels");
}
