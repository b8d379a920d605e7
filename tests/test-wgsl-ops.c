/* Graph-op kernels (src/webgpu/kernels-ops.h) without a GPU: a recording fake HAL checks what each family
 * asks for (expanded WGSL per variant, the documented binding layouts with the dynamic parameter binding
 * last, feature and size refusals), and the per-call planning (parameter blocks, grids over the
 * 65535-workgroup limit, 32-bit index limits, table splits under maxStorageBufferBindingSize, top-k
 * capacity). The kernels themselves run on real adapters in tests/web/ops.test.mjs. */
#include "cpu/engine-ops.h"
#include "gpu-fake.h"
#include "test.h"
#include "webgpu/kernels-ops.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* The recorded layout: storage kinds as given, the parameter binding last and dynamic. */
static int layout_is(const fake_gpu *f, const lw_gpu_binding_kind *want, uint32_t n) {
    return f->n_kinds == n && memcmp(f->kinds, want, n * sizeof *want) == 0 &&
           f->kinds[n - 1] == LW_GPU_BIND_UNIFORM_DYNAMIC;
}

#define S LW_GPU_BIND_STORAGE
#define R LW_GPU_BIND_STORAGE_READ
#define U LW_GPU_BIND_UNIFORM_DYNAMIC

/* ---------------------------------------------------------------------------------------------------------
 * Pipelines: every variant expands, with the documented layout
 * ------------------------------------------------------------------------------------------------------- */

static void test_pipelines(void) {
    fake_gpu f = {0};
    lw_gpu gpu = {&fake_ops, &f};
    lw_gpu_info lvp = lavapipe_info(), ss = swiftshader_info();
    char err[LW_ERRMSG_SIZE];
    lw_gpu_pipeline p;

    /* element-wise: unary ops have 3 bindings, binary 4, GEGLU with its table 5 */
    for (uint32_t op = LW_GPU_ELT_ADD; op <= LW_GPU_ELT_COPY; op++)
        for (int table = 0; table < 2; table++) {
            lw__gpu_eltwise_variant v = lw__gpu_eltwise_default(&ss, op);
            CHECK(v.wg_size == 256);
            v.gelu_table = table;
            CHECK_MSG(lw__gpu_eltwise_pipeline(&gpu, NULL, NULL, &v, &ss, &p, err) == LW_OK, "op %u: %s", op,
                      err);
            const bool bin = op == LW_GPU_ELT_ADD || op == LW_GPU_ELT_SWIGLU || op == LW_GPU_ELT_GEGLU;
            const lw_gpu_binding_kind un[] = {S, S, U}, bi[] = {S, S, S, U}, gt[] = {S, S, S, U, R};
            if (op == LW_GPU_ELT_GEGLU && table)
                CHECK(f.n_kinds == 5 && !memcmp(f.kinds, gt, sizeof gt));
            else
                CHECK_MSG(bin ? layout_is(&f, bi, 4) : layout_is(&f, un, 3), "op %u layout", op);
            CHECK(strstr(f.wgsl, "@workgroup_size(256)") != NULL);
            CHECK((strstr(f.wgsl, "gelu_table[") != NULL) == (op == LW_GPU_ELT_GEGLU && table));
            /* a call of the shared function (which every expansion defines) */
            CHECK((strstr(f.wgsl, "let y = swiglu_elem(") != NULL) == (op == LW_GPU_ELT_SWIGLU));
        }
    lw__gpu_eltwise_variant bad = {9, false, 64, false};
    lw_gpu_binding_kind kinds[LW_GPU_MAX_BINDINGS];
    CHECK(lw__gpu_eltwise_layout(&bad, kinds) == 0);
    CHECK(lw__gpu_eltwise_pipeline(&gpu, NULL, NULL, &bad, &lvp, &p, err) == LW_ERR_INVALID_ARG);

    /* RMS norm: plain and with the fused ADD; subgroups only where the device has them; the exact sum
     * (integer limbs) or the f32 one */
    for (int add = 0; add < 2; add++)
        for (int sg = 0; sg < 2; sg++)
            for (int exact = 0; exact < 2; exact++) {
                lw__gpu_norm_variant v = {sg, 128, add, exact, 0};
                CHECK(lw__gpu_norm_pipeline(&gpu, NULL, NULL, &v, &lvp, &p, err) == LW_OK);
                const lw_gpu_binding_kind pl[] = {S, R, S, U}, ad[] = {S, R, S, S, S, U};
                CHECK(add ? layout_is(&f, ad, 6) : layout_is(&f, pl, 4));
                /* the largest square's exponent (exact), the partial sums' (f32) */
                CHECK((strstr(f.wgsl, "subgroupMax") != NULL) == (sg && exact));
                CHECK((strstr(f.wgsl, "subgroupAdd(") != NULL) == sg);
                CHECK((strstr(f.wgsl, "limbs_add_square") != NULL) == exact);
                CHECK((strstr(f.wgsl, "inverseSqrt(") != NULL) == !exact);
                CHECK((strstr(f.wgsl, "sum[params.sum_offset") != NULL) == add);
            }
    lw__gpu_norm_variant nsg = {true, 64, false, true, 0};
    lw_gpu_info nosg = ss;
    nosg.has_subgroups = false;
    CHECK(lw__gpu_norm_pipeline(&gpu, NULL, NULL, &nsg, &nosg, &p, err) == LW_ERR_UNSUPPORTED);
    nsg = (lw__gpu_norm_variant){false, 96, false, false, 0}; /* not a power of two: tree reduction */
    CHECK(lw__gpu_norm_pipeline(&gpu, NULL, NULL, &nsg, &lvp, &p, err) == LW_ERR_INVALID_ARG);
    /* the exact sum's limbs would need 24 KiB of workgroup memory */
    nsg = (lw__gpu_norm_variant){false, 1024, false, true, 0};
    CHECK(lw__gpu_norm_pipeline(&gpu, NULL, NULL, &nsg, &lvp, &p, err) == LW_ERR_UNSUPPORTED);
    nsg.exact = false; /* the f32 sum: 4 KiB */
    CHECK(lw__gpu_norm_pipeline(&gpu, NULL, NULL, &nsg, &lvp, &p, err) == LW_OK);
    CHECK(!lw__gpu_norm_default(&nosg).subgroups && lw__gpu_norm_default(&lvp).subgroups);
    /* the exact sum by default on CPU adapters only (the fakes' vendor alone names no CPU driver) */
    lw_gpu_info cpu = lvp;
    strcpy(cpu.architecture, "llvmpipe");
    CHECK(lw__gpu_norm_default(&cpu).exact && !lw__gpu_norm_default(&lvp).exact);
    CHECK(lw__gpu_norm_default(&cpu).wg_size == 128 && lw__gpu_norm_default(&lvp).wg_size == 512);
    CHECK(lw__gpu_rope_qkv_default(&cpu, LW_TYPE_F16).exact_norm &&
          !lw__gpu_rope_qkv_default(&lvp, LW_TYPE_F16).exact_norm);
    for (int exact = 0; exact < 2; exact++) { /* per-head q/k norms in the attention epilogue */
        lw__gpu_rope_qkv_variant v = lw__gpu_rope_qkv_default(exact ? &cpu : &lvp, LW_TYPE_F16);
        v.qkv_one = v.qk_norm = true;
        CHECK(lw__gpu_rope_qkv_pipeline(&gpu, NULL, NULL, &v, &lvp, &p, err) == LW_OK);
        const lw_gpu_binding_kind k[] = {S, R, S, S, S, U, R, R};
        CHECK(f.n_kinds == 8 && !memcmp(f.kinds, k, sizeof k));
        CHECK((strstr(f.wgsl, "limbs_add_square") != NULL) == exact);
        CHECK((strstr(f.wgsl, "inverseSqrt(") != NULL) == !exact);
    }

    /* RoPE, f32 and f16-cache destinations */
    for (int f16 = 0; f16 < 2; f16++) {
        lw__gpu_rope_variant v = {64, f16};
        CHECK(lw__gpu_rope_pipeline(&gpu, NULL, NULL, &v, &ss, &p, err) == LW_OK);
        const lw_gpu_binding_kind k[] = {S, R, S, U};
        CHECK(layout_is(&f, k, 4));
        CHECK((strstr(f.wgsl, "read_write> d: array<u32>") != NULL) == f16);
    }
    /* the attention epilogue: 8 bindings, 7 of them storage */
    for (int f16 = 0; f16 < 2; f16++) {
        lw__gpu_rope_qkv_variant v = lw__gpu_rope_qkv_default(&ss, f16 ? LW_TYPE_F16 : LW_TYPE_F32);
        CHECK(v.kv_f16 == f16);
        CHECK(lw__gpu_rope_qkv_pipeline(&gpu, NULL, NULL, &v, &ss, &p, err) == LW_OK);
        const lw_gpu_binding_kind k[] = {S, R, S, S, S, S, S, U};
        CHECK(layout_is(&f, k, 8));
        CHECK((strstr(f.wgsl, "alias CacheWord = u32;") != NULL) == f16);
        lw_gpu_info few = ss;
        few.max_storage_buffers_per_shader_stage = 6;
        CHECK(lw__gpu_rope_qkv_pipeline(&gpu, NULL, NULL, &v, &few, &p, err) == LW_ERR_UNSUPPORTED);
        v.qkv_one = true; /* one input binding: 5 storage buffers */
        CHECK(lw__gpu_rope_qkv_pipeline(&gpu, NULL, NULL, &v, &few, &p, err) == LW_OK);
        const lw_gpu_binding_kind k1[] = {S, R, S, S, S, U};
        CHECK(layout_is(&f, k1, 6) && strstr(f.wgsl, "kx[") == NULL);
    }
    /* quantized caches: the same bindings (u32 words), a block per work item through kv-quant.wgsl */
    for (int q4 = 0; q4 < 2; q4++) {
        lw__gpu_rope_qkv_variant v = lw__gpu_rope_qkv_default(&ss, q4 ? LW_TYPE_Q4_0 : LW_TYPE_Q8_0);
        CHECK(v.kv_quant == (q4 ? LW_TYPE_Q4_0 : LW_TYPE_Q8_0) && !v.kv_f16);
        CHECK(lw__gpu_rope_qkv_pipeline(&gpu, NULL, NULL, &v, &ss, &p, err) == LW_OK);
        const lw_gpu_binding_kind k[] = {S, R, S, S, S, S, S, U};
        CHECK(layout_is(&f, k, 8) && strstr(f.wgsl, "alias CacheWord = u32;") != NULL &&
              strstr(f.wgsl, "fn kvq_store") != NULL && strstr(f.label, q4 ? "q4_0" : "q8_0") != NULL);
        CHECK(strstr(f.wgsl, q4 ? "const BLOCK_WORDS: u32 = 5u;" : "const BLOCK_WORDS: u32 = 9u;") != NULL);
        v.kv_f16 = true;
        CHECK(lw__gpu_rope_qkv_pipeline(&gpu, NULL, NULL, &v, &ss, &p, err) == LW_ERR_INVALID_ARG);
    }
    /* KV store */
    for (int f16 = 0; f16 < 2; f16++) {
        lw__gpu_kv_store_variant v = lw__gpu_kv_store_default(&ss, f16 ? LW_TYPE_F16 : LW_TYPE_F32);
        CHECK(v.f16_cache == f16);
        CHECK(lw__gpu_kv_store_pipeline(&gpu, NULL, NULL, &v, &ss, &p, err) == LW_OK);
        const lw_gpu_binding_kind k[] = {S, S, U};
        CHECK(layout_is(&f, k, 3));
        CHECK((strstr(f.wgsl, "cache: array<u32>") != NULL) == f16);
    }
    { /* Q8_0: the words of the GPU's block layout, quantized as the CPU's quantize_row_q8_0 */
        lw__gpu_kv_store_variant v = lw__gpu_kv_store_default(&ss, LW_TYPE_Q8_0);
        CHECK(v.q8_cache && !v.f16_cache);
        CHECK(lw__gpu_kv_store_pipeline(&gpu, NULL, NULL, &v, &ss, &p, err) == LW_OK);
        CHECK(strstr(f.wgsl, "cache: array<u32>") != NULL && strstr(f.wgsl, "fn store_block") != NULL);
        CHECK(strstr(f.wgsl, "const BLOCK_WORDS: u32 = 9u;") != NULL && strstr(f.label, "q8_0") != NULL);
        v.f16_cache = true;
        CHECK(lw__gpu_kv_store_pipeline(&gpu, NULL, NULL, &v, &ss, &p, err) == LW_ERR_INVALID_ARG);
    }
    { /* Q4_0: 5 words a block, quantized as quantize_row_q4_0 (x * id kept unfused through params.zero) */
        lw__gpu_kv_store_variant v = lw__gpu_kv_store_default(&ss, LW_TYPE_Q4_0);
        CHECK(v.q4_cache && !v.q8_cache && !v.f16_cache && v.wg_size == 64);
        CHECK(lw__gpu_kv_store_pipeline(&gpu, NULL, NULL, &v, &ss, &p, err) == LW_OK);
        CHECK(strstr(f.wgsl, "cache: array<u32>") != NULL && strstr(f.wgsl, "fn store_block") != NULL &&
              strstr(f.wgsl, "const BLOCK_WORDS: u32 = 5u;") != NULL &&
              strstr(f.wgsl, "unfused(kvq[8u * k + e] * id, kvq_zero())") != NULL &&
              strstr(f.wgsl, "return params.zero;") != NULL && strstr(f.label, "q4_0") != NULL);
        v.q8_cache = true;
        CHECK(lw__gpu_kv_store_pipeline(&gpu, NULL, NULL, &v, &ss, &p, err) == LW_ERR_INVALID_ARG);
    }
    /* GET_ROWS: every format of the table expands (always f32 arithmetic) */
    int formats = 0;
    for (uint32_t t = 0; t < LW_TYPE_COUNT; t++) {
        if (!lw__gpu_format_of(t)) continue;
        formats++;
        lw__gpu_get_rows_variant v = lw__gpu_get_rows_default(&lvp, t);
        CHECK_MSG(lw__gpu_get_rows_pipeline(&gpu, NULL, NULL, &v, &lvp, &p, err) == LW_OK, "type %u: %s", t,
                  err);
        const lw_gpu_binding_kind k[] = {R, S, S, U};
        CHECK(layout_is(&f, k, 4));
        CHECK(strstr(f.wgsl, "alias ftype = f32;") != NULL && strstr(f.wgsl, "enable f16;") == NULL);
        CHECK(strstr(f.wgsl, "fn dq_chunk") != NULL);
    }
    CHECK(formats >= 4);
    lw__gpu_get_rows_variant q8k = {LW_TYPE_Q8_K, 64, false};
    CHECK(lw__gpu_get_rows_pipeline(&gpu, NULL, NULL, &q8k, &lvp, &p, err) == LW_ERR_UNSUPPORTED);
    /* top-k: both passes; workgroup memory and sizes checked */
    for (int pairs = 0; pairs < 2; pairs++) {
        lw__gpu_topk_variant v = lw__gpu_topk_default(&ss);
        CHECK(v.wg_size == 256 && v.per == 16);
        CHECK(lw__gpu_topk_pipeline(&gpu, NULL, NULL, &v, pairs, &ss, &p, err) == LW_OK);
        const lw_gpu_binding_kind k[] = {S, S, U};
        CHECK(layout_is(&f, k, 3));
        CHECK(strstr(f.wgsl, "var vals: array<f32, 16>;") != NULL);
    }
    lw__gpu_topk_variant tv = {256, 33};
    CHECK(lw__gpu_topk_pipeline(&gpu, NULL, NULL, &tv, false, &ss, &p, err) == LW_ERR_INVALID_ARG);
    tv = (lw__gpu_topk_variant){512, 16};
    CHECK(lw__gpu_topk_pipeline(&gpu, NULL, NULL, &tv, false, &ss, &p, err) == LW_ERR_INVALID_ARG);

    /* the cache: one compilation per variant */
    lw__gpu_pipeline_cache cache;
    lw__gpu_cache_init(&cache, NULL);
    lw__gpu_rope_variant rv = {64, false};
    lw_gpu_pipeline a = 0, b = 0;
    int before = f.creates;
    CHECK(lw__gpu_rope_pipeline(&gpu, &cache, NULL, &rv, &ss, &a, err) == LW_OK);
    CHECK(lw__gpu_rope_pipeline(&gpu, &cache, NULL, &rv, &ss, &b, err) == LW_OK);
    CHECK(a == b && f.creates == before + 1);
    lw__gpu_cache_free(&cache);
}

/* ---------------------------------------------------------------------------------------------------------
 * Planning
 * ------------------------------------------------------------------------------------------------------- */

static void test_plans(void) {
    lw_gpu_info lvp = lavapipe_info(), ss = swiftshader_info();
    char err[LW_ERRMSG_SIZE];
    uint32_t grid[3];

    /* element-wise: the grid goes 2-D past 65535 workgroups; broadcast and shapes checked */
    lw__gpu_eltwise_variant add = lw__gpu_eltwise_default(&ss, LW_GPU_ELT_ADD);
    lw__gpu_eltwise_params ep;
    CHECK(lw__gpu_eltwise_plan(&ss, &add, 4096, 8192, 0, 0, 8192, 0, 0, 0, &ep, grid, err) == LW_OK);
    CHECK(grid[0] == 65535 && grid[1] == 3 && ep.groups_x == 65535); /* 131072 groups of 256 */
    CHECK(lw__gpu_eltwise_plan(&ss, &add, 100, 3, 7, 11, 1, 13, 0, 0, &ep, grid, err) == LW_OK);
    CHECK(ep.a_offset == 7 && ep.b_offset == 11 && ep.d_offset == 13 && ep.b_rows == 1 && grid[0] == 2);
    CHECK(lw__gpu_eltwise_plan(&ss, &add, 100, 3, 0, 0, 2, 0, 0, 0, &ep, grid, err) == LW_ERR_INVALID_ARG);
    CHECK(lw__gpu_eltwise_plan(&ss, &add, 65536, 65536, 0, 0, 1, 0, 0, 0, &ep, grid, err) ==
          LW_ERR_TOO_LARGE);
    CHECK(lw__gpu_eltwise_plan(&ss, &add, 16, 1, 0xfffffff8u, 0, 1, 0, 0, 0, &ep, grid, err) ==
          LW_ERR_TOO_LARGE);
    /* strides: a fused gate|up row of 2n, b inside a */
    lw_gpu_binding_kind kinds[LW_GPU_MAX_BINDINGS];
    lw__gpu_eltwise_variant sw = lw__gpu_eltwise_default(&ss, LW_GPU_ELT_SWIGLU);
    sw.b_in_a = true;
    CHECK(lw__gpu_eltwise_layout(&sw, kinds) == 3 && kinds[2] == LW_GPU_BIND_UNIFORM_DYNAMIC);
    CHECK(lw__gpu_eltwise_plan(&ss, &sw, 8192, 4, 0, 8192, 4, 0, 0, 0, &ep, grid, err) == LW_OK);
    CHECK(ep.a_stride == 8192 && ep.b_stride == 8192 && ep.d_stride == 8192);
    CHECK(lw__gpu_eltwise_strides(&ep, 16384, 16384, 0, err) == LW_OK);
    CHECK(ep.a_stride == 16384 && ep.b_stride == 16384 && ep.d_stride == 8192);
    CHECK(lw__gpu_eltwise_strides(&ep, 100, 0, 0, err) == LW_ERR_TOO_LARGE); /* below the row */
    lw__gpu_eltwise_variant cp = lw__gpu_eltwise_default(&ss, LW_GPU_ELT_COPY);
    CHECK(lw__gpu_out_rows_plan(&ss, &cp, 100, 6, 1, 50, 3, &ep, grid, err) == LW_OK);
    CHECK(ep.a_offset == 650 && ep.rows == 1 && ep.d_offset == 3);
    CHECK(lw__gpu_out_rows_plan(&ss, &add, 100, 6, 1, 0, 0, &ep, grid, err) == LW_ERR_INVALID_ARG);

    /* RMS norm: groups, weight slices */
    lw__gpu_norm_variant nv = lw__gpu_norm_default(&ss);
    lw__gpu_norm_params np;
    CHECK(lw__gpu_norm_plan(&ss, &nv, 4096, 128, 5, 0, 0, 128, 0, 1e-6f, &np, grid, err) == LW_OK);
    CHECK(np.groups_per_row == 32 && grid[0] == 160 && np.w_step == 0 && np.has_w == 1);
    CHECK(lw__gpu_norm_plan(&ss, &nv, 4096, 128, 5, 0, 0, 4096, 0, 1e-6f, &np, grid, err) == LW_OK);
    CHECK(np.w_step == 128);
    CHECK(lw__gpu_norm_plan(&ss, &nv, 4096, 0, 5, 0, 0, 0, 0, 1e-6f, &np, grid, err) == LW_OK);
    CHECK(np.group == 4096 && np.has_w == 0 && grid[0] == 5);
    CHECK(lw__gpu_norm_plan(&ss, &nv, 4096, 100, 5, 0, 0, 0, 0, 1e-6f, &np, grid, err) == LW_ERR_INVALID_ARG);
    CHECK(lw__gpu_norm_plan(&ss, &nv, 4096, 0, 5, 0, 0, 77, 0, 1e-6f, &np, grid, err) == LW_ERR_INVALID_ARG);
    CHECK(lw__gpu_norm_plan(&ss, &nv, 1u << 24, 0, 1, 0, 0, 0, 0, 1e-6f, &np, grid, err) ==
          LW_ERR_INVALID_ARG); /* a group of 2^24: past the exact mean's long division */
    CHECK(lw__gpu_norm_add_plan(&ss, &nv, 4096, 0, 5, 0, 1, 2, 0, 0, 0, 1e-6f, &np, grid, err) ==
          LW_ERR_INVALID_ARG); /* variant without add */
    nv.add_input = true;
    CHECK(lw__gpu_norm_add_plan(&ss, &nv, 4096, 0, 5, 0, 10, 20, 0, 4096, 0, 1e-6f, &np, grid, err) == LW_OK);
    CHECK(np.b_offset == 10 && np.sum_offset == 20 && np.x_stride == 4096 && np.d_stride == 4096);
    CHECK(lw__gpu_norm_strides(&np, 6144, 0, err) == LW_OK && np.x_stride == 6144 && np.d_stride == 4096);
    CHECK(lw__gpu_norm_strides(&np, 4000, 0, err) == LW_ERR_TOO_LARGE);
    CHECK(lw__gpu_norm_strides(&np, 1u << 30, 0, err) == LW_ERR_TOO_LARGE);

    /* RoPE: host-side constants as the CPU computes them */
    lw__node nd = {0};
    nd.op = LW_OP_ROPE;
    nd.src[1] = 3;
    nd.ip[0] = 8;
    nd.ip[1] = 128;
    nd.ip[2] = 64;
    nd.ip[3] = LW_ROPE_NEOX;
    nd.fp[0] = 10000.0f;
    nd.fp[1] = 0.25f;
    nd.fp[2] = 1.0f;
    nd.fp[3] = 0.9f;
    lw__gpu_rope_args ra = {0};
    lw__gpu_rope_args_from_node(&nd, &ra);
    CHECK(ra.has_ff && ra.n_head == 8 && ra.mode == LW_ROPE_NEOX);
    ra.rows = 3;
    ra.pos0 = 100;
    lw__gpu_rope_variant rv = lw__gpu_rope_default(&ss);
    lw__gpu_rope_params rp;
    CHECK(lw__gpu_rope_plan(&ss, &rv, &ra, &rp, grid, err) == LW_OK);
    CHECK(rp.theta_scale == powf(10000.0f, -2.0f / 64.0f));
    CHECK(rp.mscale == 0.9f * fmaf(0.1f, logf(4.0f), 1.0f));
    CHECK(rp.x_stride == 1024 && rp.d_stride == 1024 && rp.neox == 1 && grid[0] == (3 * 8 * 64 + 63) / 64);
    ra.n_rot = 130; /* more than the head */
    CHECK(lw__gpu_rope_plan(&ss, &rv, &ra, &rp, grid, err) == LW_ERR_INVALID_ARG);
    ra.n_rot = 64;
    ra.pos0 = 1u << 24; /* positions past f32's integers */
    CHECK(lw__gpu_rope_plan(&ss, &rv, &ra, &rp, grid, err) == LW_ERR_TOO_LARGE);
    ra.pos0 = 0;
    rv.out_f16 = true;
    ra.d_offset = 3;
    CHECK(lw__gpu_rope_plan(&ss, &rv, &ra, &rp, grid, err) == LW_ERR_INVALID_ARG);
    ra.d_offset = 4;
    CHECK(lw__gpu_rope_plan(&ss, &rv, &ra, &rp, grid, err) == LW_OK);

    /* the epilogue: Q's block plus K/V's, grid over Q pairs and K, V items */
    lw__gpu_rope_qkv_variant qv = lw__gpu_rope_qkv_default(&ss, LW_TYPE_F16);
    lw__gpu_rope_qkv_params qp;
    lw__gpu_rope_args qa = {0};
    lw__gpu_rope_args_from_node(&nd, &qa);
    qa.n_head = 32;
    qa.rows = 1;
    qa.pos0 = 77;
    lw__gpu_kv_dest kd = {8, 0, 0, 77 * 1024, 0, 0, 0, 77 * 1024, 0};
    CHECK(lw__gpu_rope_qkv_plan(&ss, &qv, &qa, &kd, &qp, grid, err) == LW_OK);
    CHECK(qp.rope.pad == 8 && qp.kc_stride == 1024 && qp.vc_offset == 77 * 1024 &&
          grid[0] == (48 * 64 + 63) / 64);
    kd.kc_offset = 3;
    CHECK(lw__gpu_rope_qkv_plan(&ss, &qv, &qa, &kd, &qp, grid, err) == LW_ERR_INVALID_ARG);
    /* quantized caches: K and V in blocks of 32 (8 heads x 128 = 32 blocks each), cells of whole blocks */
    kd.kc_offset = 77 * 1024;
    qv = lw__gpu_rope_qkv_default(&ss, LW_TYPE_Q4_0);
    CHECK(lw__gpu_rope_qkv_plan(&ss, &qv, &qa, &kd, &qp, grid, err) == LW_OK);
    CHECK(grid[0] == (32 * 64 + 2 * 32 + 63) / 64 && qp.zero == 0 && qp.kc_offset == 77 * 1024);
    kd.kc_offset = 16;
    CHECK(lw__gpu_rope_qkv_plan(&ss, &qv, &qa, &kd, &qp, grid, err) == LW_ERR_INVALID_ARG);

    /* KV store: cells inside the cache, even f16 rows */
    lw__gpu_kv_store_variant kv = lw__gpu_kv_store_default(&ss, LW_TYPE_F16);
    lw__gpu_kv_store_params kp;
    CHECK(lw__gpu_kv_store_plan(&ss, &kv, 1024, 7, 0, 0, 0, 100, 107, &kp, grid, err) == LW_OK);
    CHECK(kp.cell0 == 100 && kp.x_stride == 1024 && grid[0] == (7 * 512 + 255) / 256);
    CHECK(lw__gpu_kv_store_plan(&ss, &kv, 1024, 8, 0, 0, 0, 100, 107, &kp, grid, err) == LW_ERR_INVALID_ARG);
    CHECK(lw__gpu_kv_store_plan(&ss, &kv, 1023, 1, 0, 0, 0, 0, 4, &kp, grid, err) == LW_ERR_INVALID_ARG);
    CHECK(lw__gpu_kv_store_plan(&ss, &kv, 1024, 1, 0, 0, 0, 5000000, 5000001, &kp, grid, err) ==
          LW_ERR_TOO_LARGE);
    /* Q8_0: one invocation per block of 32, rows and offsets of whole blocks */
    kv = lw__gpu_kv_store_default(&ss, LW_TYPE_Q8_0);
    CHECK(lw__gpu_kv_store_plan(&ss, &kv, 1024, 7, 0, 0, 0, 100, 107, &kp, grid, err) == LW_OK);
    CHECK(grid[0] * kv.wg_size >= 7 * 32 && (grid[0] - 1) * kv.wg_size < 7 * 32);
    CHECK(lw__gpu_kv_store_plan(&ss, &kv, 1040, 1, 0, 0, 0, 0, 4, &kp, grid, err) == LW_ERR_INVALID_ARG);
    CHECK(lw__gpu_kv_store_plan(&ss, &kv, 1024, 1, 0, 0, 16, 0, 4, &kp, grid, err) == LW_ERR_INVALID_ARG);
    /* Q4_0 alike; the unfused() operand is 0 */
    kv = lw__gpu_kv_store_default(&ss, LW_TYPE_Q4_0);
    CHECK(lw__gpu_kv_store_plan(&ss, &kv, 1024, 7, 0, 0, 64, 100, 107, &kp, grid, err) == LW_OK);
    CHECK(grid[0] * kv.wg_size >= 7 * 32 && (grid[0] - 1) * kv.wg_size < 7 * 32 && kp.zero == 0 &&
          kp.cache_offset == 64);
    CHECK(lw__gpu_kv_store_plan(&ss, &kv, 1040, 1, 0, 0, 0, 0, 4, &kp, grid, err) == LW_ERR_INVALID_ARG);
    CHECK(lw__gpu_kv_store_plan(&ss, &kv, 1024, 1, 0, 0, 16, 0, 4, &kp, grid, err) == LW_ERR_INVALID_ARG);

    /* GET_ROWS: a 1B-shape embedding (128256 x 2048 Q8_0 = 279 MB) splits under lavapipe's 128 MiB */
    const lw__gpu_format *q8 = lw__gpu_format_of(LW_TYPE_Q8_0);
    const uint64_t rb = 2048 / 32 * 34;
    uint64_t per = 0, parts = 0;
    CHECK(q8 && lw__gpu_get_rows_split(&lvp, 128256, rb, &per, &parts, err) == LW_OK);
    CHECK(parts == 3 && per * rb <= lvp.max_storage_buffer_binding_size && (per * rb) % 256 == 0);
    CHECK((per + 1) * rb > lvp.max_storage_buffer_binding_size || ((per + 1) * rb) % 256 != 0);
    const uint64_t per_lvp = per;
    CHECK(lw__gpu_get_rows_split(&ss, 128256, rb, &per, &parts, err) == LW_OK && parts == 1 && per == 128256);
    per = per_lvp;
    lw__gpu_get_rows_variant gv = lw__gpu_get_rows_default(&lvp, LW_TYPE_Q8_0);
    lw__gpu_get_rows_params gp;
    CHECK_MSG(lw__gpu_get_rows_plan(&lvp, &gv, 2048, 7, per, per, 0, 0, 0, 0, &gp, grid, err) == LW_OK, "%s",
              err);
    CHECK(gp.row_stride == rb && gp.row_base == per && grid[0] == 7 && gp.d_stride == 2048);
    CHECK(lw__gpu_get_rows_plan(&lvp, &gv, 2048, 7, 0, 128256, 0, 0, 0, 0, &gp, grid, err) ==
          LW_ERR_TOO_LARGE);
    CHECK(lw__gpu_get_rows_plan(&lvp, &gv, 2040, 7, 0, 10, 0, 0, 0, 0, &gp, grid, err) == LW_ERR_INVALID_ARG);
    CHECK(lw__gpu_get_rows_plan(&lvp, &gv, 2048, 7, 0, 10, 3, 0, 0, 0, &gp, grid, err) == LW_ERR_INVALID_ARG);
    CHECK(lw__gpu_get_rows_split(&lvp, 10, 200000000, &per, &parts, err) == LW_ERR_TOO_LARGE);

    /* top-k: capacity of one merge; scratch sizes */
    lw__gpu_topk_variant tv = lw__gpu_topk_default(&ss);
    lw__gpu_topk_plan_out tp;
    CHECK(lw__gpu_topk_plan(&ss, &tv, 262144, 64, 0, 0, 0, &tp, err) == LW_OK);
    CHECK(tp.pass1.groups == 64 && tp.scratch_pairs == 4096 && tp.pass2.n == 4096 && tp.grid2[0] == 1);
    CHECK(lw__gpu_topk_plan(&ss, &tv, 262145, 64, 0, 0, 0, &tp, err) == LW_ERR_TOO_LARGE);
    CHECK(lw__gpu_topk_plan(&ss, &tv, 151936, 1, 5, 7, 9, &tp, err) == LW_OK);
    CHECK(tp.pass1.in_offset == 5 && tp.pass1.out_offset == 7 && tp.pass2.in_offset == 7 &&
          tp.pass2.out_offset == 9);
    CHECK(lw__gpu_topk_plan(&ss, &tv, 10, 11, 0, 0, 0, &tp, err) == LW_ERR_INVALID_ARG);
    CHECK(lw__gpu_topk_plan(&ss, &tv, 100000, LW_GPU_TOPK_MAX + 1, 0, 0, 0, &tp, err) == LW_ERR_INVALID_ARG);
}

/* The GELU table holds ggml's values, low half = even index. */
static void test_gelu_table(void) {
    static uint32_t t[LW_GPU_GELU_TABLE_WORDS];
    lw__gpu_gelu_table(t);
    int bad = 0;
    for (uint32_t h = 0; h < 65536; h += 97) {
        uint16_t v = (uint16_t)(t[h >> 1] >> ((h & 1) * 16));
        float want = lw__cpu_gelu_f16((uint16_t)h);
        bad += !(lw__fp16_to_fp32(v) == want || (isnan(want) && isnan(lw__fp16_to_fp32(v))));
    }
    CHECK(bad == 0);
    CHECK(lw__fp16_to_fp32((uint16_t)t[0x3c00 >> 1]) == lw__cpu_gelu_f16(0x3c00)); /* gelu(1) */
}

int main(void) {
    test_pipelines();
    test_plans();
    test_gelu_table();
    return test_summary("test-wgsl-ops");
}
