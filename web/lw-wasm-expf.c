/* Wasm test entry points of musl's expf in WGSL (src/webgpu/shaders/expf-musl.wgsl), for
 * tests/web/expf.test.mjs: a tiny kernel runs expf_musl() and WGSL's own exp() over an input array, and the
 * results are compared, bit for bit, with C's expf in this same module, which IS musl's (Emscripten's libc).
 *
 * The inputs (lw_wasm_expf_run) are built here from a seed, in groups that target the algorithm's edges:
 *   0 random floats over [-110, 100]
 *   1 near 0: a grid over [-1, 1], random significands in every binade 2^-40 .. 2^0, the 2^-30 shortcut's
 *     neighbourhood, subnormal inputs
 *   2 subnormal results: random over [-104, -87.3], consecutive floats around -87.3365 (2^-126),
 *     -103.279 (2^-149) and the underflow threshold -0x1.9fe368p6
 *   3 the overflow edge: consecutive floats around +-0x1.62e42ep6 and +-88 (musl's |x| >= 88 branch)
 *   4 integers in [-110, 100]; multiples (and odd half-multiples) of ln 2 / 32, where z = x * 32 / ln 2 is
 *     close to an integer k (r tiny) or to a rounding tie of k
 *   5 specials: +-0, +-inf, NaNs (quiet, signalling, negative), +-FLT_MAX, +-FLT_MIN, the smallest subnormal
 *   6 random bit patterns whose floats lie in the softmax range [-80, 0]
 * lw_wasm_expf_run_range() takes consecutive bit patterns instead (exhaustive sweeps, slice by slice).
 * lw_wasm_expf_stat() then counts mismatches per group (any NaN matches any NaN). Compiled only by the wasm
 * build. */
#include "core/core.h"
#include "webgpu/gpu.h"
#include "webgpu/wgsl-pp.h"

#include <emscripten/emscripten.h>
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

lw_status lw_wasm_gpu_open(const lw_allocator *alloc, lw_gpu *out); /* lw-gpu-wasm.c */

#define EXPF_GROUPS 7   /* input groups (see the top of the file)       */
#define EXPF_WG 64u     /* invocations per workgroup of the test kernel */
#define EXPF_GRID 4096u /* workgroups (the kernel strides over the rest) */

/* The test kernel: both exps of every input, as bits (a NaN input passes through unchanged to the call). */
static const char expf_test_wgsl[] =
    "#include \"expf-musl.wgsl\"\n"
    "@group(0) @binding(0) var<storage, read> xs: array<u32>;\n"
    "@group(0) @binding(1) var<storage, read_write> ys: array<u32>;  // expf_musl(x)\n"
    "@group(0) @binding(2) var<storage, read_write> yp: array<u32>;  // exp(x)\n"
    "@compute @workgroup_size(64)\n"
    "fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nw: vec3<u32>) {\n"
    "    let n = arrayLength(&xs);\n"
    "    for (var i = gid.x; i < n; i += nw.x * 64u) {\n"
    "        let x = bitcast<f32>(xs[i]);\n"
    "        ys[i] = bitcast<u32>(expf_musl(x));\n"
    "        yp[i] = bitcast<u32>(exp(x));\n"
    "    }\n"
    "}\n";

/* ---------------------------------------------------------------------------------------------------------
 * Test context
 * ------------------------------------------------------------------------------------------------------- */

typedef struct lw_wasm_expf {
    lw_gpu gpu;                     /* the HAL                                                  */
    lw_gpu_pipeline pipe;           /* the test kernel (built on first use)                     */
    lw_gpu_buffer bufs[3];          /* inputs, expf_musl results, exp results                   */
    uint32_t *x;                    /* input bits                                               */
    uint32_t *y_musl, *y_plain;     /* GPU results (read-back targets)                          */
    size_t n;                       /* inputs                                                   */
    size_t group_end[EXPF_GROUPS];  /* end of each group in x                                   */
    char err[LW_ERRMSG_SIZE];       /* why the last call failed; the first mismatch, after stat */
} lw_wasm_expf;

static void release(lw_wasm_expf *c) {
    for (int i = 0; i < 3; i++) {
        if (c->bufs[i]) c->gpu.ops->buffer_destroy(c->gpu.ctx, c->bufs[i]);
        c->bufs[i] = 0;
    }
    free(c->x);
    free(c->y_musl);
    free(c->y_plain);
    c->x = c->y_musl = c->y_plain = NULL;
    c->n = 0;
    c->err[0] = 0;
}

EMSCRIPTEN_KEEPALIVE lw_wasm_expf *lw_wasm_expf_new(void) {
    lw_wasm_expf *c = calloc(1, sizeof *c);
    if (!c) return NULL;
    if (lw_wasm_gpu_open(NULL, &c->gpu) != LW_OK) {
        lw__errorf(c->err, LW_ERR_IO, "no GPU device");
        c->gpu.ops = NULL;
    }
    return c;
}

EMSCRIPTEN_KEEPALIVE void lw_wasm_expf_free(lw_wasm_expf *c) {
    if (!c) return;
    if (c->gpu.ops) {
        release(c);
        c->gpu.ops->destroy(c->gpu.ctx);
    }
    free(c);
}

EMSCRIPTEN_KEEPALIVE const char *lw_wasm_expf_error(const lw_wasm_expf *c) {
    return c ? c->err : "out of memory";
}

/* ---------------------------------------------------------------------------------------------------------
 * Inputs
 * ------------------------------------------------------------------------------------------------------- */

static uint32_t rndu(uint32_t *s) {
    *s ^= *s << 13;
    *s ^= *s >> 17;
    *s ^= *s << 5;
    return *s;
}

/* Uniform in [lo, hi). */
static float rnd_in(uint32_t *s, float lo, float hi) {
    return lo + (hi - lo) * (float)((rndu(s) >> 8) * (1.0 / 16777216.0));
}

static uint32_t bits_of(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

/* Appends to c->x (capacity checked by the caller's count). */
typedef struct {
    uint32_t *x;  /* the array       */
    size_t n;     /* used            */
    size_t cap;   /* allocated       */
} inputs;

static void put(inputs *in, uint32_t b) {
    if (in->n < in->cap) in->x[in->n++] = b;
}

static void put_f(inputs *in, float f) {
    put(in, bits_of(f));
}

/* count consecutive float bit patterns from the one of f minus count / 2 (same sign). */
static void put_around(inputs *in, float f, uint32_t count) {
    const uint32_t b = bits_of(f) - count / 2;
    for (uint32_t i = 0; i < count; i++) put(in, b + i);
}

/* Fills the groups (n_rand random floats over [-110, 100], n_soft random bit patterns in [-80, 0]). */
static void make_inputs(lw_wasm_expf *c, inputs *in, uint32_t seed, uint32_t n_rand, uint32_t n_soft) {
    uint32_t s = seed ? seed : 1;
    /* 0: random over [-110, 100] */
    for (uint32_t i = 0; i < n_rand; i++) put_f(in, rnd_in(&s, -110.0f, 100.0f));
    c->group_end[0] = in->n;
    /* 1: near 0 */
    for (int i = -65536; i <= 65536; i++) put_f(in, (float)i * 0x1p-16f);
    for (int e = -40; e <= 0; e++) {
        for (int i = 0; i < 1024; i++) {
            const uint32_t b = ((uint32_t)(e + 127) << 23) | (rndu(&s) & 0x7fffffu);
            put(in, b | (i & 1 ? 0x80000000u : 0u));
        }
    }
    put_around(in, 0x1p-30f, 4096);
    put_around(in, -0x1p-30f, 4096);
    put_around(in, 0x1p-25f, 4096);
    put_around(in, -0x1p-25f, 4096);
    for (int i = 0; i < 1024; i++) put(in, (rndu(&s) & 0x807fffffu));
    c->group_end[1] = in->n;
    /* 2: subnormal results */
    for (int i = 0; i < 131072; i++) put_f(in, rnd_in(&s, -104.0f, -87.3f));
    put_around(in, -87.336544f, 16384);
    put_around(in, -103.27893f, 16384);
    put_around(in, -0x1.9fe368p6f, 16384);
    c->group_end[2] = in->n;
    /* 3: the overflow edge and musl's |x| >= 88 branch */
    put_around(in, 0x1.62e42ep6f, 16384);
    put_around(in, -0x1.62e42ep6f, 16384);
    put_around(in, 88.0f, 8192);
    put_around(in, -88.0f, 8192);
    c->group_end[3] = in->n;
    /* 4: integers; k * ln2/32 and (k + 1/2) * ln2/32 over the whole range of k */
    for (int i = -110; i <= 100; i++) put_f(in, (float)i);
    for (int k = -4800; k <= 4100; k++) {
        const float m = (float)((double)k * 0.021660849392498290); /* ln 2 / 32 */
        put_f(in, m);
        put(in, bits_of(m) + 1);
        put(in, bits_of(m) - 1);
        put_f(in, (float)(((double)k + 0.5) * 0.021660849392498290));
    }
    c->group_end[4] = in->n;
    /* 5: specials */
    const uint32_t specials[] = {0x00000000u, 0x80000000u, 0x7f800000u, 0xff800000u, 0x7fc00000u, 0xffc00000u,
                                 0x7f800001u, 0xff800001u, 0x7fbfffffu, 0x7fffffffu, 0x00000001u, 0x80000001u,
                                 0x007fffffu, 0x807fffffu, 0x00800000u, 0x80800000u, 0x7f7fffffu, 0xff7fffffu};
    for (size_t i = 0; i < sizeof specials / sizeof specials[0]; i++) put(in, specials[i]);
    c->group_end[5] = in->n;
    /* 6: random bit patterns in [-80, 0] (0x80000000 .. bits of -80: every float there equally likely) */
    const uint32_t lo = 0x80000000u, span = bits_of(-80.0f) - lo + 1;
    for (uint32_t i = 0; i < n_soft; i++) put(in, lo + rndu(&s) % span);
    c->group_end[6] = in->n;
}

/* ---------------------------------------------------------------------------------------------------------
 * Run and compare
 * ------------------------------------------------------------------------------------------------------- */

/* The test kernel's pipeline: the entry above expanded with the embedded shaders (expf-musl.wgsl, ...). */
static lw_status build_pipeline(lw_wasm_expf *c) {
    if (c->pipe) return LW_OK;
    size_t n_builtin = 0;
    const lw__wgsl_file *builtin = lw__wgsl_builtin(&n_builtin);
    lw__wgsl_file *files = calloc(n_builtin + 1, sizeof *files);
    if (!files) return lw__errorf(c->err, LW_ERR_NOMEM, "out of memory");
    memcpy(files, builtin, n_builtin * sizeof *files);
    files[n_builtin] = (lw__wgsl_file){"expf-test.wgsl", expf_test_wgsl};
    lw__wgsl_pp_params pp = {files, n_builtin + 1, NULL, 0, 0, 0};
    char *wgsl = NULL;
    lw_status st = lw__wgsl_pp(NULL, "expf-test.wgsl", &pp, &wgsl, NULL, c->err);
    free(files);
    if (st != LW_OK) return st;
    const lw_gpu_binding_kind kinds[3] = {LW_GPU_BIND_STORAGE_READ, LW_GPU_BIND_STORAGE, LW_GPU_BIND_STORAGE};
    st = c->gpu.ops->pipeline_create(c->gpu.ctx, wgsl, "main", kinds, 3, "expf-test", &c->pipe);
    lw_allocator a = lw__allocator_or_default(NULL);
    lw__free(&a, wgsl);
    if (st != LW_OK) {
        const char *e = c->gpu.ops->error(c->gpu.ctx);
        return lw__errorf(c->err, st, "expf-test: pipeline creation failed%s%.180s", e ? ": " : "", e ? e : "");
    }
    return LW_OK;
}

/* Dispatches the test kernel over c->x[0..c->n) and schedules the read-backs. */
static lw_status dispatch(lw_wasm_expf *c) {
    const uint64_t bytes = (uint64_t)c->n * 4;
    lw_status st = build_pipeline(c);
    const uint32_t usage[3] = {LW_GPU_USAGE_STORAGE | LW_GPU_USAGE_COPY_DST,
                               LW_GPU_USAGE_STORAGE | LW_GPU_USAGE_COPY_SRC,
                               LW_GPU_USAGE_STORAGE | LW_GPU_USAGE_COPY_SRC};
    const char *labels[3] = {"expf x", "expf musl", "expf plain"};
    for (int i = 0; i < 3 && st == LW_OK; i++) {
        st = c->gpu.ops->buffer_create(c->gpu.ctx, bytes, usage[i], labels[i], &c->bufs[i]);
        if (st != LW_OK) lw__errorf(c->err, st, "buffer %s failed", labels[i]);
    }
    if (st == LW_OK) st = c->gpu.ops->buffer_write(c->gpu.ctx, c->bufs[0], 0, c->x, bytes);
    lw_gpu_bind_group group = 0;
    if (st == LW_OK) {
        const lw_gpu_bind b[3] = {{c->bufs[0], 0, 0}, {c->bufs[1], 0, 0}, {c->bufs[2], 0, 0}};
        if ((st = c->gpu.ops->bind_group_create(c->gpu.ctx, c->pipe, b, 3, &group)) != LW_OK)
            lw__errorf(c->err, st, "bind group failed");
    }
    if (st == LW_OK) {
        const size_t groups = (c->n + EXPF_WG - 1) / EXPF_WG;
        c->gpu.ops->dispatch(c->gpu.ctx, c->pipe, group, 0, groups < EXPF_GRID ? (uint32_t)groups : EXPF_GRID, 1, 1);
        st = c->gpu.ops->submit(c->gpu.ctx);
    }
    if (st == LW_OK) st = c->gpu.ops->read(c->gpu.ctx, c->bufs[1], 0, c->y_musl, bytes);
    if (st == LW_OK) st = c->gpu.ops->read(c->gpu.ctx, c->bufs[2], 0, c->y_plain, bytes);
    if (st != LW_OK && !c->err[0]) lw__errorf(c->err, st, "GPU run failed");
    return st;
}

/* Room for cap inputs and their two results. */
static lw_status alloc_arrays(lw_wasm_expf *c, size_t cap) {
    c->x = malloc(cap * 4);
    c->y_musl = malloc(cap * 4);
    c->y_plain = malloc(cap * 4);
    return c->x && c->y_musl && c->y_plain ? LW_OK : lw__errorf(c->err, LW_ERR_NOMEM, "out of memory");
}

/* Builds the inputs (seed; n_rand random floats over [-110, 100]; n_soft random bit patterns in [-80, 0]),
 * dispatches the test kernel and schedules the read-backs. Returns an lw_status (lw_wasm_expf_error). */
EMSCRIPTEN_KEEPALIVE int lw_wasm_expf_run(lw_wasm_expf *c, uint32_t seed, uint32_t n_rand, uint32_t n_soft) {
    if (!c->gpu.ops) return LW_ERR_IO;
    release(c);
    if (n_rand > (1u << 24) || n_soft > (1u << 24))
        return lw__errorf(c->err, LW_ERR_INVALID_ARG, "at most 2^24 random inputs per kind");
    inputs in = {NULL, 0, (size_t)n_rand + n_soft + 600000u}; /* the fixed groups: about 0.46 M */
    lw_status st = alloc_arrays(c, in.cap);
    if (st != LW_OK) return st;
    in.x = c->x;
    make_inputs(c, &in, seed, n_rand, n_soft);
    if (in.n == in.cap) return lw__errorf(c->err, LW_ERR_TOO_LARGE, "input array full");
    c->n = in.n;
    return dispatch(c);
}

/* The inputs are the count (1 .. 2^24) consecutive bit patterns from first (wrapping past 0xffffffff), all in
 * group 0: exhaustive sweeps in slices. Returns an lw_status (lw_wasm_expf_error). */
EMSCRIPTEN_KEEPALIVE int lw_wasm_expf_run_range(lw_wasm_expf *c, uint32_t first, uint32_t count) {
    if (!c->gpu.ops) return LW_ERR_IO;
    release(c);
    if (count == 0 || count > (1u << 24)) return lw__errorf(c->err, LW_ERR_INVALID_ARG, "1 .. 2^24 inputs per slice");
    lw_status st = alloc_arrays(c, count);
    if (st != LW_OK) return st;
    for (uint32_t i = 0; i < count; i++) c->x[i] = first + i;
    c->n = count;
    for (int g = 0; g < EXPF_GROUPS; g++) c->group_end[g] = count;
    return dispatch(c);
}

/* Whether two results agree: the same bits, or both NaN. */
static int same(uint32_t a, uint32_t b) {
    const int nan_a = (a & 0x7fffffffu) > 0x7f800000u, nan_b = (b & 0x7fffffffu) > 0x7f800000u;
    return a == b || (nan_a && nan_b);
}

/* After settle: for group g (0..6; -1: all inputs), what = 0: inputs, 1: results of expf_musl that differ
 * from C's expf (the first one is described in lw_wasm_expf_error), 2: results of WGSL's exp() that differ.
 * -1 with a message on failure. */
EMSCRIPTEN_KEEPALIVE double lw_wasm_expf_stat(lw_wasm_expf *c, int g, int what) {
    if (!c->gpu.ops || !c->n || g < -1 || g >= EXPF_GROUPS || what < 0 || what > 2) return -1;
    const char *e = c->gpu.ops->error(c->gpu.ctx);
    if (e) {
        lw__errorf(c->err, LW_ERR_IO, "GPU: %.220s", e);
        return -1;
    }
    if (c->gpu.ops->pending(c->gpu.ctx)) {
        lw__errorf(c->err, LW_ERR_INVALID_ARG, "read-back still pending (await lwGpu.settle())");
        return -1;
    }
    const size_t lo = g <= 0 ? 0 : c->group_end[g - 1], hi = g < 0 ? c->n : c->group_end[g];
    if (what == 0) return (double)(hi - lo);
    const uint32_t *gpu = what == 1 ? c->y_musl : c->y_plain;
    size_t bad = 0;
    for (size_t i = lo; i < hi; i++) {
        float x;
        memcpy(&x, &c->x[i], 4);
        const uint32_t want = bits_of(expf(x));
        if (same(want, gpu[i])) continue;
        if (!bad++ && what == 1)
            snprintf(c->err, sizeof c->err, "x = %a (0x%08x): expf %a (0x%08x), expf_musl 0x%08x", (double)x,
                     (unsigned)c->x[i], (double)expf(x), (unsigned)want, (unsigned)gpu[i]);
    }
    return (double)bad;
}
