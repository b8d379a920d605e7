/* The WebGPU model runner's static plan without a GPU (src/webgpu/gpu-model.c): a fake HAL with a small
 * maxStorageBufferBindingSize records every buffer, pipeline, bind group and dispatch and checks WebGPU's
 * rules on them, for synthetic models of each architecture:
 *   - no binding exceeds maxStorageBufferBindingSize, every binding lies inside its buffer, storage offsets
 *     are multiples of the device alignment (a table larger than one binding is split by rows: here the
 *     token embedding spans several);
 *   - no dispatch binds one buffer read-only and writable, and writable ranges of one buffer never overlap
 *     (the activation colouring);
 *   - every uniform binding is dynamic and every dispatch's offset is a slot of the parameter arena;
 *   - every weight byte range is streamed from the host source exactly as the file holds it;
 *   - decoding creates nothing: buffers, pipelines and bind groups are all made at plan time. */
#include "engine-synth.h"
#include "model/model.h"
#include "test.h"
#include "webgpu/gpu-model.h"

#include <stdio.h>
#include <string.h>

/* ---------------------------------------------------------------------------------------------------------
 * A recording fake HAL
 * ------------------------------------------------------------------------------------------------------- */

#define MAXO 4096

typedef struct fake {
    lw_gpu_info info;                               /* what info() reports                   */
    uint64_t buf_size[MAXO];                        /* buffer handle -> size (0: none)       */
    uint32_t buf_usage[MAXO];                       /* its usage                             */
    uint32_t n_buf;                                 /* handles given (1-based)               */
    lw_gpu_binding_kind kinds[MAXO][LW_GPU_MAX_BINDINGS]; /* pipeline -> binding kinds       */
    uint32_t n_kinds[MAXO];                         /* pipeline -> bindings                  */
    uint32_t n_pipe;                                /* handles given                         */
    lw_gpu_bind groups[MAXO][LW_GPU_MAX_BINDINGS];  /* bind group -> bindings                */
    uint32_t group_pipe[MAXO];                      /* bind group -> pipeline                */
    uint32_t n_group;                               /* handles given                         */
    uint64_t dispatches, streamed, written;         /* work recorded                         */
    uint64_t bad;                                   /* rule violations seen                  */
    lw_gpu_buffer params;                           /* the uniform buffer (first UNIFORM one) */
    const char *file;                               /* the model file (checks streamed bytes) */
    lw_source *src;                                 /* open on it                            */
} fake;

#define BAD(f, ...) (fprintf(stderr, "fake HAL: " __VA_ARGS__), fputc('\n', stderr), (f)->bad++)

static lw_status f_info(void *ctx, lw_gpu_info *o) {
    *o = ((fake *)ctx)->info;
    return LW_OK;
}
static lw_status f_buffer_create(void *ctx, uint64_t size, uint32_t usage, const char *label, lw_gpu_buffer *out) {
    fake *f = ctx;
    (void)label;
    if (f->n_buf + 1 >= MAXO || size == 0 || size > f->info.max_buffer_size) return LW_ERR_INVALID_ARG;
    *out = ++f->n_buf;
    f->buf_size[*out] = (size + 3) & ~3ull;
    f->buf_usage[*out] = usage;
    if ((usage & LW_GPU_USAGE_UNIFORM) && !f->params) f->params = *out;
    return LW_OK;
}
static void f_buffer_destroy(void *ctx, lw_gpu_buffer b) {
    ((fake *)ctx)->buf_size[b] = 0;
}
static lw_status f_buffer_write(void *ctx, lw_gpu_buffer b, uint64_t off, const void *data, uint64_t size) {
    fake *f = ctx;
    (void)data;
    if (!b || b > f->n_buf || off % 4 || off + size > f->buf_size[b]) BAD(f, "write out of range");
    f->written += size;
    return LW_OK;
}
static lw_status f_buffer_write_host(void *ctx, lw_gpu_buffer b, uint64_t off, uint32_t host, uint64_t src_off,
                                     uint64_t size) {
    fake *f = ctx;
    (void)host;
    if (!b || b > f->n_buf || off % 4 || off + ((size + 3) & ~3ull) > f->buf_size[b]) BAD(f, "streamed write out of range");
    /* writeBuffer needs 4-byte offsets only: the parts of a fused projection follow each other unaligned
     * (bindings, checked in f_bind_group_create, start at aligned offsets) */
    if (off % 4) BAD(f, "weight piece misaligned");
    if (src_off + size > lw_source_size(f->src)) BAD(f, "streamed range past the file");
    f->streamed += size;
    return LW_OK;
}
static lw_status f_pipeline_create(void *ctx, const char *wgsl, const char *entry, const lw_gpu_binding_kind *kinds,
                                   uint32_t n, const char *label, lw_gpu_pipeline *out) {
    fake *f = ctx;
    (void)label;
    if (!wgsl || !entry || f->n_pipe + 1 >= MAXO || n > LW_GPU_MAX_BINDINGS) return LW_ERR_INVALID_ARG;
    *out = ++f->n_pipe;
    memcpy(f->kinds[*out], kinds, n * sizeof *kinds);
    f->n_kinds[*out] = n;
    for (uint32_t i = 0; i < n; i++)
        if (kinds[i] == LW_GPU_BIND_UNIFORM) BAD(f, "pipeline %s: a uniform binding without a dynamic offset", label);
    return LW_OK;
}
static lw_status f_bind_group_create(void *ctx, lw_gpu_pipeline p, const lw_gpu_bind *b, uint32_t n, lw_gpu_bind_group *out) {
    fake *f = ctx;
    if (!p || p > f->n_pipe || n != f->n_kinds[p] || f->n_group + 1 >= MAXO) return LW_ERR_INVALID_ARG;
    for (uint32_t i = 0; i < n; i++) {
        const lw_gpu_bind *x = &b[i];
        const uint64_t size = x->size ? x->size : f->buf_size[x->buffer] - x->offset;
        const bool uniform = f->kinds[p][i] >= LW_GPU_BIND_UNIFORM;
        if (!x->buffer || x->buffer > f->n_buf || x->offset + size > f->buf_size[x->buffer])
            BAD(f, "binding %u outside its buffer", i);
        if (!uniform && size > f->info.max_storage_buffer_binding_size) BAD(f, "binding %u: %llu bytes exceed a binding", i, (unsigned long long)size);
        if (!uniform && x->offset % f->info.min_storage_buffer_offset_alignment) BAD(f, "binding %u misaligned", i);
        if (!uniform && !(f->buf_usage[x->buffer] & LW_GPU_USAGE_STORAGE)) BAD(f, "binding %u: no storage usage", i);
        for (uint32_t j = 0; j < i; j++) { /* WebGPU: one buffer not read-only and writable; writable ranges disjoint */
            const lw_gpu_bind *y = &b[j];
            if (y->buffer != x->buffer || uniform || f->kinds[p][j] >= LW_GPU_BIND_UNIFORM) continue;
            const bool wx = f->kinds[p][i] == LW_GPU_BIND_STORAGE, wy = f->kinds[p][j] == LW_GPU_BIND_STORAGE;
            const uint64_t ys = y->size ? y->size : f->buf_size[y->buffer] - y->offset;
            const bool overlap = x->offset < y->offset + ys && y->offset < x->offset + size;
            if (wx != wy) BAD(f, "bindings %u and %u: one buffer read-only and writable", j, i);
            else if (wx && overlap) BAD(f, "bindings %u and %u: overlapping writable ranges", j, i);
        }
    }
    *out = ++f->n_group;
    memcpy(f->groups[*out], b, n * sizeof *b);
    f->group_pipe[*out] = p;
    return LW_OK;
}
static void f_dispatch(void *ctx, lw_gpu_pipeline p, lw_gpu_bind_group g, uint32_t dyn, uint32_t x, uint32_t y, uint32_t z) {
    fake *f = ctx;
    if (!g || g > f->n_group || f->group_pipe[g] != p) BAD(f, "dispatch with a foreign bind group");
    if (dyn % 256 || dyn + 256 > f->buf_size[f->params]) BAD(f, "dynamic offset %u outside the arena", dyn);
    if (!x || !y || !z || x > f->info.max_compute_workgroups_per_dimension || y > f->info.max_compute_workgroups_per_dimension)
        BAD(f, "grid %u x %u x %u", x, y, z);
    f->dispatches++;
}
static void f_copy(void *ctx, lw_gpu_buffer s, uint64_t so, lw_gpu_buffer d, uint64_t dof, uint64_t n) {
    (void)ctx, (void)s, (void)so, (void)d, (void)dof, (void)n;
}
static lw_status f_submit(void *ctx) {
    (void)ctx;
    return LW_OK;
}
static lw_status f_read(void *ctx, lw_gpu_buffer b, uint64_t off, void *dst, uint64_t size) {
    fake *f = ctx;
    if (!b || b > f->n_buf || off + size > f->buf_size[b]) BAD(f, "read out of range");
    memset(dst, 0, (size_t)size);
    return LW_OK;
}
static uint32_t f_pending(void *ctx) {
    (void)ctx;
    return 0;
}
static const char *f_error(void *ctx) {
    (void)ctx;
    return NULL;
}
static void f_destroy(void *ctx) {
    (void)ctx;
}

static const lw_gpu_ops fake_ops = {f_info,     f_buffer_create, f_buffer_destroy, f_buffer_write, f_buffer_write_host,
                                    f_pipeline_create, f_bind_group_create, f_dispatch, f_copy, f_submit, f_read,
                                    f_pending, NULL, f_error, f_destroy};

/* ---------------------------------------------------------------------------------------------------------
 * One model through the plan and a few steps
 * ------------------------------------------------------------------------------------------------------- */

/* Dispatches of a one-token step expected for a model: per block and outside the blocks. */
static void run(const char *path, const char *what, uint64_t per_block, uint64_t outside, uint32_t bind_kib,
                const char *device, int glu_fold, uint32_t kvq) {
    static fake f; /* large: not on the stack */
    memset(&f, 0, sizeof f);
    f.info.max_buffer_size = 1u << 30;
    f.info.max_storage_buffer_binding_size = bind_kib << 10; /* small: the 80 KiB embedding needs several pieces */
    f.info.max_uniform_buffer_binding_size = 65536;
    f.info.min_storage_buffer_offset_alignment = 256;
    f.info.min_uniform_buffer_offset_alignment = 256;
    f.info.max_storage_buffers_per_shader_stage = 8;
    f.info.max_compute_workgroup_storage_size = 32768;
    f.info.max_compute_invocations_per_workgroup = 256;
    f.info.max_compute_workgroup_size_x = 256;
    f.info.max_compute_workgroups_per_dimension = 65535;
    f.info.has_subgroups = true;
    snprintf(f.info.device, sizeof f.info.device, "%s", device);
    if (strstr(device, "NVIDIA")) { /* a GPU as the H100 / H200 offer it: integer dot products, 1024 invocations */
        f.info.has_dot4 = true;
        f.info.max_compute_invocations_per_workgroup = f.info.max_compute_workgroup_size_x = 1024;
        f.info.max_storage_buffers_per_shader_stage = 10;
    }
    char err[LW_ERRMSG_SIZE];
    CHECK(lw_source_open_file(path, NULL, &f.src, err, sizeof err) == LW_OK);
    lw_model *m = NULL;
    lw_model_params mp = lw_model_default_params();
    mp.no_weights = 1;
    mp.no_vocab = 1;
    CHECK_MSG(lw_model_load_file(path, &mp, &m) == LW_OK, "%s: %s", what, lw_model_error(m));
    lw__gpu_model *g = NULL;
    lw__gpu_model_params p = lw__gpu_model_default_params();
    p.n_ctx = 64;
    p.n_batch = 8;
    p.submit_every = 32;
    p.host_source = 1;
    p.glu_fold = glu_fold;
    lw_gpu gpu = {&fake_ops, &f};
    if (kvq && m) { /* a cache type without kernels is refused with a message, a Q8_0 / Q4_0 one planned */
        p.kv_type = LW_TYPE_Q5_0;
        CHECK_MSG(lw__gpu_model_create(gpu, m, &p, &g) == LW_ERR_INVALID_ARG &&
                      strstr(lw__gpu_model_error(g), "q8_0 or q4_0"),
                  "%s: a q5_0 cache: %s", what, lw__gpu_model_error(g));
        lw__gpu_model_free(g);
        g = NULL;
        p.kv_type = kvq;
    }
    lw_status st = m ? lw__gpu_model_create(gpu, m, &p, &g) : LW_ERR_INVALID_ARG;
    CHECK_MSG(st == LW_OK, "%s: %s", what, lw__gpu_model_error(g));
    if (st == LW_OK) {
        uint64_t wb, kv, acts;
        lw__gpu_model_bytes(g, &wb, &kv, &acts);
        /* K and V of every block: 2 x layers x cells x the row's bytes (per 32 elements Q8_0 36, Q4_0 20) */
        const uint64_t kv_row = (uint64_t)m->hp.n_head_kv * m->hp.n_embd_head_k;
        const uint64_t want_kv = 2 * (uint64_t)lw_model_n_layer(m) * p.n_ctx *
                                 (kvq == LW_TYPE_Q8_0   ? kv_row / 32 * 36
                                  : kvq == LW_TYPE_Q4_0 ? kv_row / 32 * 20
                                                        : kv_row * 2);
        CHECK(lw__gpu_model_kv_type(g) == (kvq ? kvq : LW_TYPE_F16));
        CHECK_MSG(kv == want_kv, "%s: %llu KV bytes, %llu expected", what, (unsigned long long)kv,
                  (unsigned long long)want_kv);
        CHECK_MSG(f.streamed <= wb && f.streamed + wb / 4 >= wb, "%s: streamed %llu of %llu", what,
                  (unsigned long long)f.streamed, (unsigned long long)wb);
        CHECK_MSG(f.written < 4096 + 131072, "%s: %llu bytes written from memory at load", what, (unsigned long long)f.written);
        const lw__gpu_model_counters c0 = lw__gpu_model_get_counters(g);
        const uint32_t n0 = f.n_buf, p0 = f.n_pipe, g0 = f.n_group;
        int32_t prompt[11] = {1, 5, 9, 200, 37, 11, 12, 13, 14, 15, 16}; /* 11 > n_batch: two steps */
        CHECK(lw__gpu_model_decode(g, prompt, 11, LW_GPU_OUT_ARGMAX) == LW_OK);
        for (int i = 0; i < 5; i++) {
            int32_t t = 7 + i;
            CHECK(lw__gpu_model_decode(g, &t, 1, LW_GPU_OUT_ARGMAX) == LW_OK);
        }
        const uint64_t d0 = f.dispatches;
        int32_t t = 3;
        CHECK(lw__gpu_model_decode(g, &t, 1, LW_GPU_OUT_LOGITS) == LW_OK);
        CHECK_MSG(f.dispatches - d0 == lw__gpu_model_step_dispatches(g) + 2, "%s: %llu dispatches per step, %llu + 2 expected",
                  what, (unsigned long long)(f.dispatches - d0), (unsigned long long)lw__gpu_model_step_dispatches(g));
        /* the fusions are planned (gpu-model-fuse.c, gpu-model-ops.c): see main() for what each count is */
        CHECK_MSG(lw__gpu_model_step_dispatches(g) == per_block * (uint64_t)lw_model_n_layer(m) + outside,
                  "%s: %llu dispatches per token, %llu per block + %llu expected", what,
                  (unsigned long long)lw__gpu_model_step_dispatches(g), (unsigned long long)per_block,
                  (unsigned long long)outside);
        const lw__gpu_model_counters c1 = lw__gpu_model_get_counters(g);
        CHECK_MSG(f.n_buf == n0 && f.n_pipe == p0 && f.n_group == g0, "%s: objects created while decoding", what);
        CHECK(c1.buffers == c0.buffers && c1.pipelines == c0.pipelines && c1.bind_groups == c0.bind_groups);
        CHECK(lw__gpu_model_n_past(g) == 17);
        /* a full context is refused, not overrun */
        int32_t many[64] = {0};
        CHECK(lw__gpu_model_decode(g, many, 64, LW_GPU_OUT_NONE) == LW_ERR_TOO_LARGE);
        printf("%s: %u buffers, %u pipelines, %u bind groups, %llu dispatches per token (%d blocks), %llu bytes of weights\n",
               what, f.n_buf, f.n_pipe, f.n_group, (unsigned long long)lw__gpu_model_step_dispatches(g), lw_model_n_layer(m),
               (unsigned long long)wb);
    }
    CHECK_MSG(f.bad == 0, "%s: %llu WebGPU rule violations", what, (unsigned long long)f.bad);
    lw__gpu_model_free(g);
    lw_model_free(m);
    lw_source_close(f.src);
}

/* The token embedding from a row store (gpu-model-rows.c): the table leaves the weight buffers for a slots
 * buffer and an id -> slot map, the gather stays one dispatch (through the map), rows stream from the file
 * on a miss and must be loaded before a step, decoding creates nothing; a tied table stays resident and
 * says why. */
static void run_rows(void) {
    static fake f; /* large: not on the stack */
    char path[512], tied_path[512], err[LW_ERRMSG_SIZE];
    synth_spec sp = {.n_vocab = 320,
                     .n_embd = 64,
                     .n_layer = 2,
                     .n_head = 4,
                     .n_head_kv = 2,
                     .n_ff = 96,
                     .wtype = LW_TYPE_Q8_0,
                     .tied = 0,
                     .seed = 11,
                     .arch = "llama"};
    CHECK(synth_write(synth_path(path, sizeof path, "gpu-plan-rows.gguf"), &sp) == 0);
    sp.tied = 1;
    CHECK(synth_write(synth_path(tied_path, sizeof tied_path, "gpu-plan-rows-tied.gguf"), &sp) == 0);
    uint64_t wb_resident = 0, step_resident = 0;
    for (int k = 0; k < 3; k++) { /* resident, row store, tied (fallback) */
        const char *file = k == 2 ? tied_path : path;
        memset(&f, 0, sizeof f);
        f.info.max_buffer_size = 1u << 30;
        f.info.max_storage_buffer_binding_size = 32u << 10;
        f.info.max_uniform_buffer_binding_size = 65536;
        f.info.min_storage_buffer_offset_alignment = f.info.min_uniform_buffer_offset_alignment = 256;
        f.info.max_storage_buffers_per_shader_stage = 8;
        f.info.max_compute_workgroup_storage_size = 32768;
        f.info.max_compute_invocations_per_workgroup = f.info.max_compute_workgroup_size_x = 256;
        f.info.max_compute_workgroups_per_dimension = 65535;
        f.info.has_subgroups = true;
        CHECK(lw_source_open_file(file, NULL, &f.src, err, sizeof err) == LW_OK);
        lw_model *m = NULL;
        lw_model_params mp = lw_model_default_params();
        mp.no_weights = 1;
        mp.no_vocab = 1;
        CHECK(lw_model_load_file(file, &mp, &m) == LW_OK);
        lw__gpu_model_params p = lw__gpu_model_default_params();
        p.n_ctx = 64;
        p.n_batch = 8;
        p.host_source = 1;
        p.rows_embd = k ? 40 : 0; /* 1/8 of the table */
        lw__gpu_model *g = NULL;
        lw_gpu gpu = {&fake_ops, &f};
        CHECK_MSG(m && lw__gpu_model_create(gpu, m, &p, &g) == LW_OK, "rows %d: %s", k,
                  lw__gpu_model_error(g));
        if (!g) {
            lw_model_free(m);
            lw_source_close(f.src);
            continue;
        }
        const char *msg = NULL;
        const lw_status rs = lw__gpu_model_rows_status(g, &msg);
        lw_rows_stats st;
        uint64_t wb, kv, acts, rewinds;
        lw__gpu_model_bytes(g, &wb, &kv, &acts);
        CHECK(lw__gpu_model_rows_stats(g, &st, &rewinds) == LW_OK);
        int32_t prompt[6] = {1, 300, 9, 200, 37, 300};
        if (k == 0) {
            wb_resident = wb;
            CHECK(rs == LW_OK && !msg[0] && !st.active && lw__gpu_model_rows_step(g) == 0);
        } else if (k == 1) {
            CHECK_MSG(rs == LW_OK && st.active && st.n_slots == 40 && st.warm_loads == 40, "%s", msg);
            CHECK_MSG(wb + 320 * 68 <= wb_resident, "weights %llu, resident %llu", (unsigned long long)wb,
                      (unsigned long long)wb_resident);
            CHECK(lw__gpu_model_rows_step(g) == 8);
            /* with a host source, rows are loaded (and awaited) before the step: decode alone refuses */
            CHECK(lw__gpu_model_decode(g, prompt, 6, LW_GPU_OUT_ARGMAX) == LW_ERR_INVALID_ARG);
        } else {
            CHECK_MSG(rs == LW_ERR_UNSUPPORTED && strstr(msg, "tied") && !st.active, "%s", msg);
        }
        const uint32_t n0 = f.n_buf, p0 = f.n_pipe, g0 = f.n_group;
        uint32_t loads = 0;
        CHECK(lw__gpu_model_rows_load(g, prompt, 6, &loads) == LW_OK);
        CHECK(loads == (k == 1 ? 2u : 0u)); /* 300 and 200 (300's second time a hit); 1, 9, 37 warm */
        CHECK(lw__gpu_model_decode(g, prompt, 6, LW_GPU_OUT_ARGMAX) == LW_OK);
        CHECK(lw__gpu_model_rows_load(g, prompt, 9, &loads) == (k == 1 ? LW_ERR_INVALID_ARG : LW_OK));
        const uint64_t d0 = f.dispatches;
        int32_t t = 301, slot = -1;
        CHECK(lw__gpu_model_rows_load(g, &t, 1, &loads) == LW_OK);
        CHECK(lw__gpu_model_decode(g, &t, 1, LW_GPU_OUT_ARGMAX) == LW_OK);
        CHECK(f.dispatches - d0 == lw__gpu_model_step_dispatches(g) + 2);
        if (k == 0) step_resident = lw__gpu_model_step_dispatches(g);
        CHECK_MSG(lw__gpu_model_step_dispatches(g) == step_resident, "rows %d: %llu dispatches per token", k,
                  (unsigned long long)lw__gpu_model_step_dispatches(g));
        CHECK(lw__gpu_model_decode_next(g, LW_GPU_OUT_ARGMAX, &slot) == LW_OK); /* gathers through the map */
        CHECK(lw__gpu_model_rows_check(g, 301) == 1);
        CHECK(lw__gpu_model_rows_check(g, 250) == (k == 1 ? 0 : 1)); /* 250 was never loaded */
        CHECK(lw__gpu_model_rows_stats(g, &st, &rewinds) == LW_OK);
        CHECK(rewinds == (k == 1 ? 1u : 0u));
        if (k == 1) /* the prompt's 6, 301 and its check; 40 warm rows and 3 misses read */
            CHECK(st.lookups == 8 && st.hits == 5 && st.misses == 3 && st.bytes_read == 43 * 68);
        CHECK_MSG(f.n_buf == n0 && f.n_pipe == p0 && f.n_group == g0,
                  "rows %d: objects created while decoding", k);
        CHECK_MSG(f.bad == 0, "rows %d: %llu WebGPU rule violations", k, (unsigned long long)f.bad);
        printf("rows %s: %s; %u buffers, %llu bytes of weights, %llu dispatches per token\n",
               k == 0   ? "off"
               : k == 1 ? "40 of 320"
                        : "tied",
               msg[0] ? msg : "resident", f.n_buf, (unsigned long long)wb,
               (unsigned long long)lw__gpu_model_step_dispatches(g));
        lw__gpu_model_free(g);
        lw_model_free(m);
        lw_source_close(f.src);
    }
}

int main(void) {
    run_rows();
    /* Dispatches of a one-token step with the planned fusions. A llama block: norm (+ the previous
     * block's residual ADD), one Q|K|V mat-vec (gpu-model-fuse.c), rope_qkv (both ROPEs and both KV_STOREs,
     * reading q, k, v from the fused output), attention (one split at 17 cells), O, norm (+ ADD), one
     * gate|up mat-vec, down with SWIGLU in its x loads (X_GLU): 8. In f32 the gate and up weights (2 x 24
     * KiB) do not fit one of this fake's 32 KiB bindings together: they stay two mat-vecs and SWIGLU its
     * own dispatch (10). qwen2: the q|k|v biases (placed side by side) are added by rope_qkv (qkv_bias): 8; qwen3: the per-head Q and
     * K norms are rope_qkv's (qk_norm), so as llama (f32: 10); phi3: 8 (the SCALE of the rotated q is
     * rope_qkv's q_scale); gemma3: + the two post norms (10; its GELU table needs a 128 KiB binding). Outside the blocks, gemma3: the
     * embedding, its SCALE, two OUT_ROWS, the final norm, the output (6). Outside the blocks: the embedding pieces (f32: 3 of 80 KiB, Q8_0: 1), the last
     * block's two OUT_ROWS, the final norm (+ ADD), the output pieces (tied: as many), qwen2's output bias. */
    static const struct {
        const char *arch;
        uint32_t wtype;
        int biases, qk_norm, fused;
        uint64_t per_block, outside;
        uint32_t bind_kib; /* maxStorageBufferBindingSize */
        const char *device; /* the adapter's name                                     */
        int glu_fold;       /* lw__gpu_model_params.glu_fold                          */
        uint32_t kvq;       /* 0: an f16 KV cache, heads of 16; else the quantized cache's
                               type (LW_TYPE_Q8_0 / Q4_0), heads of 32                */
    } archs[] = {{"llama", LW_TYPE_F32, 0, 0, 0, 10, 9, 32, "", -1, 0},      {"llama", LW_TYPE_Q8_0, 0, 0, 0, 8, 5, 32, "", -1, 0},
                 {"qwen2", LW_TYPE_Q8_0, 1, 0, 0, 8, 6, 32, "", -1, 0},      {"qwen3", LW_TYPE_F32, 0, 1, 0, 10, 9, 32, "", -1, 0},
                 {"phi3", LW_TYPE_Q8_0, 0, 0, 1, 8, 5, 32, "", -1, 0},       {"gemma3", LW_TYPE_Q8_0, 0, 0, 0, 10, 6, 128, "", -1, 0},
                 /* the GLU folding off (asked, or by default on a CPU adapter): SWIGLU dispatches again */
                 {"llama", LW_TYPE_Q8_0, 0, 0, 0, 9, 5, 32, "", 0, 0},
                 {"llama", LW_TYPE_Q8_0, 0, 0, 0, 9, 5, 32, "llvmpipe (LLVM 15.0.6, 256 bits)", -1, 0},
                 {"llama", LW_TYPE_Q8_0, 0, 0, 0, 8, 5, 32, "llvmpipe (LLVM 15.0.6, 256 bits)", 1, 0},
                 /* a Q8_0 / Q4_0 cache: rope_qkv quantizes K and V a block per work item, so the same
                  * counts as an f16 cache's (llama 8, qwen3 f32 10 with its Q and K norms); only the
                  * fusions built on rope_qkv that store cells (the Q|K|V mat-vec's RoPE epilogue, the
                  * decode attention's RoPE prologue) stay off, which this fake's plan does not take */
                 {"llama", LW_TYPE_Q8_0, 0, 0, 0, 8, 5, 32, "", -1, LW_TYPE_Q8_0},
                 {"qwen3", LW_TYPE_F32, 0, 1, 0, 10, 9, 32, "", -1, LW_TYPE_Q8_0},
                 {"llama", LW_TYPE_Q8_0, 0, 0, 0, 8, 5, 32, "", -1, LW_TYPE_Q4_0},
                 /* a GPU (integer dot products, 512+ invocations): the Q|K|V mat-vec with the norm in its
                  * prologue and rope_qkv's writes as its epilogue, attention (one split), the quantizer of
                  * its output, O, gate|up with the norm and the GLU output rounded for the down projection
                  * (matvec-q8-norm.wgsl GLU_OUT), down: 6 per block (issue #13: at most 6); outside as above */
                 {"llama", LW_TYPE_Q8_0, 0, 0, 0, 6, 5, 32, "NVIDIA H100 80GB HBM3", -1, 0},
                 {"llama", LW_TYPE_Q4_0, 0, 0, 0, 6, 5, 32, "NVIDIA H100 80GB HBM3", -1, 0},
                 {"qwen3", LW_TYPE_F32, 0, 1, 0, 10, 9, 32, "", -1, LW_TYPE_Q4_0}};
    for (size_t i = 0; i < sizeof archs / sizeof archs[0]; i++) {
        char path[512], name[64], what[64];
        /* f32 embedding of 320 x 64 = 80 KiB over 32 KiB bindings: three pieces (gather and tied output) */
        synth_spec sp = {.n_vocab = 320, .n_embd = 64, .n_layer = 2, .n_head = archs[i].kvq ? 2 : 4,
                         .n_head_kv = archs[i].kvq ? 1 : 2, .n_ff = 96,
                         .wtype = archs[i].wtype, .tied = 1, .seed = 3 + i, .arch = archs[i].arch,
                         .biases = archs[i].biases, .qk_norm = archs[i].qk_norm, .fused = archs[i].fused};
        snprintf(what, sizeof what, "%s %s%s%s%s%s", archs[i].arch, lw_type_get(archs[i].wtype)->name,
                 archs[i].device[0] ? " on " : "", archs[i].device,
                 archs[i].glu_fold < 0 ? "" : archs[i].glu_fold ? ", glu_fold 1" : ", glu_fold 0",
                 archs[i].kvq == LW_TYPE_Q8_0   ? ", q8_0 cache"
                 : archs[i].kvq == LW_TYPE_Q4_0 ? ", q4_0 cache"
                                                : "");
        snprintf(name, sizeof name, "gpu-plan-%s-%s%s.gguf", archs[i].arch, lw_type_get(archs[i].wtype)->name,
                 archs[i].kvq == LW_TYPE_Q8_0   ? "-h32"
                 : archs[i].kvq == LW_TYPE_Q4_0 ? "-h32-q4"
                                                : "");
        synth_path(path, sizeof path, name);
        CHECK(synth_write(path, &sp) == 0);
        run(path, what, archs[i].per_block, archs[i].outside, archs[i].bind_kib, archs[i].device,
            archs[i].glu_fold, archs[i].kvq);
    }
    return test_summary("test-gpu-model-plan");
}
