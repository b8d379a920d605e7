/* Weights over 4 GiB through the WebGPU plan (src/webgpu/gpu-model.c) without a GPU or a file: a GGUF
 * header built in memory for a llama model of the 8B's blocks (4.6 GiB of Q8_0), served by a host-callback
 * source whose data bytes are never materialized, opened header-only (src/model/model.c), and planned over
 * a fake HAL with SwiftShader's limits (1 GiB buffers and bindings) and lavapipe's (4 GiB buffers, 128 MiB
 * bindings). Checks: no buffer over maxBufferSize, no binding over maxStorageBufferBindingSize or outside
 * its buffer, and the host-source writes tile the file's tensor data exactly once (offsets past 2^32
 * included), each inside its buffer, none overlapping. The same path in the wasm32 build, through the JS
 * glue: tests/web/big.test.mjs. */
#include "gguf-bytes.h"
#include "model/model.h"
#include "test.h"
#include "webgpu/gpu-model.h"

#include <stdio.h>
#include <string.h>

#define MAXB 4096
#define MAXW 8192

typedef struct wr {
    lw_gpu_buffer buf;
    uint64_t off, src, size;
} wr;

typedef struct fake {
    lw_gpu_info info;
    uint64_t buf_size[MAXB];
    uint32_t n_buf, n_pipe, n_group;
    wr w[MAXW];
    uint32_t n_w;
    uint64_t bad;
} fake;

#define BAD(f, ...) (fprintf(stderr, "fake HAL: " __VA_ARGS__), fputc('\n', stderr), (f)->bad++)

static lw_status f_info(void *ctx, lw_gpu_info *o) {
    *o = ((fake *)ctx)->info;
    return LW_OK;
}
static lw_status f_buffer_create(void *ctx, uint64_t size, uint32_t usage, const char *label,
                                 lw_gpu_buffer *out) {
    fake *f = ctx;
    (void)usage;
    if (f->n_buf + 1 >= MAXB || size == 0) return LW_ERR_INVALID_ARG;
    if (size > f->info.max_buffer_size)
        BAD(f, "%s: %llu bytes exceed maxBufferSize", label, (unsigned long long)size);
    *out = ++f->n_buf;
    f->buf_size[*out] = (size + 3) & ~3ull;
    return LW_OK;
}
static void f_buffer_destroy(void *ctx, lw_gpu_buffer b) {
    ((fake *)ctx)->buf_size[b] = 0;
}
static lw_status f_buffer_write(void *ctx, lw_gpu_buffer b, uint64_t off, const void *data, uint64_t size) {
    fake *f = ctx;
    (void)data;
    if (!b || b > f->n_buf || off % 4 || off + size > f->buf_size[b]) BAD(f, "write out of range");
    return LW_OK;
}
static lw_status f_buffer_write_host(void *ctx, lw_gpu_buffer b, uint64_t off, uint32_t host, uint64_t src,
                                     uint64_t size) {
    fake *f = ctx;
    (void)host;
    if (!b || b > f->n_buf || off % 4 || off + size > f->buf_size[b]) BAD(f, "streamed write out of range");
    if (f->n_w < MAXW) f->w[f->n_w++] = (wr){b, off, src, size};
    return LW_OK;
}
static lw_status f_pipeline_create(void *ctx, const char *wgsl, const char *entry,
                                   const lw_gpu_binding_kind *kinds, uint32_t n, const char *label,
                                   lw_gpu_pipeline *out) {
    (void)wgsl, (void)entry, (void)kinds, (void)n, (void)label;
    *out = ++((fake *)ctx)->n_pipe;
    return LW_OK;
}
static lw_status f_bind_group_create(void *ctx, lw_gpu_pipeline p, const lw_gpu_bind *b, uint32_t n,
                                     lw_gpu_bind_group *out) {
    fake *f = ctx;
    (void)p;
    for (uint32_t i = 0; i < n; i++) {
        const uint64_t size = b[i].size ? b[i].size : f->buf_size[b[i].buffer] - b[i].offset;
        if (!b[i].buffer || b[i].buffer > f->n_buf || b[i].offset + size > f->buf_size[b[i].buffer])
            BAD(f, "binding %u outside its buffer", i);
        if (size > f->info.max_storage_buffer_binding_size)
            BAD(f, "binding %u: %llu bytes exceed a binding", i, (unsigned long long)size);
        if (b[i].offset % 256) BAD(f, "binding %u misaligned", i);
    }
    *out = ++f->n_group;
    return LW_OK;
}
static void f_dispatch(void *ctx, lw_gpu_pipeline p, lw_gpu_bind_group g, uint32_t dyn, uint32_t x,
                       uint32_t y, uint32_t z) {
    (void)ctx, (void)p, (void)g, (void)dyn, (void)x, (void)y, (void)z;
}
static void f_copy(void *ctx, lw_gpu_buffer s, uint64_t so, lw_gpu_buffer d, uint64_t dof, uint64_t n) {
    (void)ctx, (void)s, (void)so, (void)d, (void)dof, (void)n;
}
static lw_status f_submit(void *ctx) {
    (void)ctx;
    return LW_OK;
}
static lw_status f_read(void *ctx, lw_gpu_buffer b, uint64_t off, void *dst, uint64_t size) {
    (void)ctx, (void)b, (void)off;
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

static const lw_gpu_ops fake_ops = {f_info,
                                    f_buffer_create,
                                    f_buffer_destroy,
                                    f_buffer_write,
                                    f_buffer_write_host,
                                    f_pipeline_create,
                                    f_bind_group_create,
                                    f_dispatch,
                                    f_copy,
                                    f_submit,
                                    f_read,
                                    f_pending,
                                    NULL,
                                    f_error,
                                    f_destroy};

/* ---------------------------------------------------------------------------------------------------------
 * The model: a header in memory, data bytes that read as zeros
 * ------------------------------------------------------------------------------------------------------- */

typedef struct model_bytes {
    gb head;       /* header + tensor infos, padded to 32 */
    uint64_t size; /* the whole file                      */
} model_bytes;

static lw_status mb_read(void *user, uint64_t off, void *dst, size_t n) {
    const model_bytes *mb = user;
    memset(dst, 0, n);
    if (off < mb->head.n)
        memcpy(dst, mb->head.p + off, n < mb->head.n - off ? n : (size_t)(mb->head.n - off));
    return LW_OK;
}

static void kv_f32(gb *b, const char *key, float v) {
    uint32_t u;
    memcpy(&u, &v, 4);
    gb_str(b, key);
    gb_u32(b, 6 /* FLOAT32 */);
    gb_u32(b, u);
}

/* llama with E-dim blocks, Q8_0 matrices and f32 norms; every tensor's size is a multiple of 32 (no gaps). */
static void build(model_bytes *mb, uint32_t E, uint32_t F, uint32_t L, uint32_t V, uint32_t H, uint32_t HKV) {
    const uint64_t KD = (uint64_t)E / H * HKV;
    memset(mb, 0, sizeof *mb);
    gb *b = &mb->head;
    const uint64_t n_t = 3 + 9 * (uint64_t)L;
    gb_header(b, 3, n_t, 8);
    gb_kv_str(b, "general.architecture", "llama");
    gb_kv_u32(b, "llama.context_length", 4096);
    gb_kv_u32(b, "llama.embedding_length", E);
    gb_kv_u32(b, "llama.block_count", L);
    gb_kv_u32(b, "llama.feed_forward_length", F);
    gb_kv_u32(b, "llama.attention.head_count", H);
    gb_kv_u32(b, "llama.attention.head_count_kv", HKV);
    kv_f32(b, "llama.attention.layer_norm_rms_epsilon", 1e-5f);
    uint64_t off = 0;
#define T2(name, a, c)                                                                                       \
    do {                                                                                                     \
        const uint64_t ne[2] = {(a), (c)};                                                                   \
        gb_tensor(b, name, 2, ne, LW_TYPE_Q8_0, off);                                                        \
        off += (a) / 32 * 34 * (c);                                                                          \
    } while (0)
#define T1(name)                                                                                             \
    do {                                                                                                     \
        const uint64_t ne[1] = {E};                                                                          \
        gb_tensor(b, name, 1, ne, LW_TYPE_F32, off);                                                         \
        off += 4ull * E;                                                                                     \
    } while (0)
    T2("token_embd.weight", E, V);
    T1("output_norm.weight");
    T2("output.weight", E, V);
    char n[64];
    for (uint32_t l = 0; l < L; l++) {
#define N(s) (snprintf(n, sizeof n, "blk.%u.%s", l, s), n)
        T1(N("attn_norm.weight"));
        T2(N("attn_q.weight"), E, E);
        T2(N("attn_k.weight"), E, KD);
        T2(N("attn_v.weight"), E, KD);
        T2(N("attn_output.weight"), E, E);
        T1(N("ffn_norm.weight"));
        T2(N("ffn_gate.weight"), E, F);
        T2(N("ffn_up.weight"), E, F);
        T2(N("ffn_down.weight"), F, E);
#undef N
    }
#undef T1
#undef T2
    gb_pad(b, 32);
    mb->size = b->n + off;
}

static int cmp_src(const void *a, const void *b) {
    const wr *x = a, *y = b;
    return x->src < y->src ? -1 : x->src > y->src;
}
static int cmp_dst(const void *a, const void *b) {
    const wr *x = a, *y = b;
    return x->buf != y->buf ? (x->buf < y->buf ? -1 : 1) : x->off < y->off ? -1 : x->off > y->off;
}

static void run(const model_bytes *mb, const char *what, uint64_t max_buffer, uint64_t max_binding) {
    static fake f;
    memset(&f, 0, sizeof f);
    f.info.max_buffer_size = max_buffer;
    f.info.max_storage_buffer_binding_size = max_binding;
    f.info.max_uniform_buffer_binding_size = 65536;
    f.info.min_storage_buffer_offset_alignment = 256;
    f.info.min_uniform_buffer_offset_alignment = 256;
    f.info.max_storage_buffers_per_shader_stage = 8;
    f.info.max_compute_workgroup_storage_size = 32768;
    f.info.max_compute_invocations_per_workgroup = 256;
    f.info.max_compute_workgroup_size_x = 256;
    f.info.max_compute_workgroups_per_dimension = 65535;
    lw_source *src = NULL;
    CHECK(lw_source_from_callbacks(mb->size, mb_read, NULL, (void *)mb, NULL, &src) == LW_OK);
    lw_model *m = NULL;
    lw_model_params mp = lw_model_default_params();
    mp.no_weights = 1;
    lw_status st = lw_model_load_source(src, &mp, &m);
    CHECK_MSG(st == LW_OK, "%s: %s", what, lw_model_error(m));
    const uint64_t data0 = mb->head.n, data = mb->size - data0;
    CHECK_MSG(st != LW_OK || lw_model_weight_bytes(m) >= data, "%s: %llu weight bytes", what,
              (unsigned long long)lw_model_weight_bytes(m));
    lw__gpu_model *g = NULL;
    lw__gpu_model_params p = lw__gpu_model_default_params();
    p.n_ctx = 64;
    p.n_batch = 8;
    p.host_source = 1;
    lw_gpu gpu = {&fake_ops, &f};
    st = st == LW_OK ? lw__gpu_model_create(gpu, m, &p, &g) : st;
    CHECK_MSG(st == LW_OK, "%s: %s", what, g ? lw__gpu_model_error(g) : "no model");
    if (st == LW_OK) {
        CHECK_MSG(f.n_w < MAXW, "%s: too many writes for this test", what);
        /* every data byte once: the writes sorted by source offset tile [data0, size) */
        qsort(f.w, f.n_w, sizeof f.w[0], cmp_src);
        uint64_t at = data0, past4g = 0;
        for (uint32_t i = 0; i < f.n_w; i++) {
            CHECK_MSG(f.w[i].src == at, "%s: bytes from %llu missing or written twice (next write from %llu)",
                      what, (unsigned long long)at, (unsigned long long)f.w[i].src);
            at = f.w[i].src + f.w[i].size;
            past4g += f.w[i].src + f.w[i].size > (1ull << 32);
        }
        CHECK_MSG(at == mb->size, "%s: streamed up to %llu of %llu", what, (unsigned long long)at,
                  (unsigned long long)mb->size);
        CHECK_MSG(past4g > 0, "%s: nothing past 4 GiB", what);
        qsort(f.w, f.n_w, sizeof f.w[0], cmp_dst);
        for (uint32_t i = 1; i < f.n_w; i++)
            if (f.w[i].buf == f.w[i - 1].buf && f.w[i].off < f.w[i - 1].off + f.w[i - 1].size)
                BAD(&f, "weight writes overlap in buffer %u", (unsigned)f.w[i].buf);
        uint64_t wb, kv, acts;
        lw__gpu_model_bytes(g, &wb, &kv, &acts);
        printf("%s: %.2f GiB of weights in %llu bytes of buffers, %u buffers, %u writes (%llu past 4 GiB), "
               "%u bind groups\n",
               what, (double)data / (1u << 30), (unsigned long long)wb, f.n_buf, f.n_w,
               (unsigned long long)past4g, f.n_group);
    }
    CHECK_MSG(f.bad == 0, "%s: %llu WebGPU rule violations", what, (unsigned long long)f.bad);
    lw__gpu_model_free(g);
    lw_model_free(m);
    lw_source_close(src);
}

int main(void) {
    model_bytes mb;
    build(&mb, 4096, 14336, 20, 32000, 32, 8); /* the 8B's blocks, 20 of them */
    CHECK(mb.size > (1ull << 32) + (1ull << 29));
    run(&mb, "swiftshader limits", 1ull << 30, 1ull << 30);
    run(&mb, "lavapipe limits", 4294967295ull, 128ull << 20);
    gb_free(&mb.head);
    return test_summary("test-gpu-model-big");
}
