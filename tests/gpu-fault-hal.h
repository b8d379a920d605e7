/* A whole fake GPU HAL (every lw_gpu_ops entry, no device) that can be told to fail: the N-th buffer,
 * pipeline or bind group creation returns an error, or the device is "lost" from the N-th submit on
 * (submit and read fail, error() says so, as Dawn reports a lost device). It tracks live objects so a test
 * can check that a failed or freed GPU model released every buffer it created. Used by the fault-injection
 * test (tests/test-fault-inject.c) and the model fuzz target (tests/fuzz/fuzz-model.c). */
#ifndef LW_TEST_GPU_FAULT_HAL_H
#define LW_TEST_GPU_FAULT_HAL_H

#include "webgpu/gpu.h"

#include <stdio.h>
#include <string.h>

#define FH_MAXO 8192 /* objects of each kind one fake can hold */

typedef struct fault_hal {
    lw_gpu_info info;                /* the adapter's limits reported by info()                      */
    uint64_t buf_size[FH_MAXO];      /* size of each live buffer (0: destroyed or never created)     */
    uint32_t n_kinds[FH_MAXO];       /* bindings of each pipeline                                    */
    uint32_t n_buf, n_pipe, n_group; /* objects created so far (ids are 1-based counts)            */
    uint32_t live_buf;               /* buffers created and not destroyed                            */
    uint64_t live_bytes, max_bytes;  /* bytes of live buffers, and the most at once                */
    uint32_t fail_buffer_at;         /* 1-based buffer_create call that fails (0: none)              */
    uint32_t fail_pipeline_at;       /* 1-based pipeline_create call that fails (0: none)            */
    uint32_t fail_group_at;          /* 1-based bind_group_create call that fails (0: none)          */
    uint32_t lose_at_submit;         /* the device is lost at this 1-based submit (0: never)         */
    uint32_t submits;                /* submit calls so far                                          */
    uint64_t dispatches;             /* dispatches recorded                                          */
    uint64_t bad;                    /* WebGPU rule violations seen (out-of-range writes, reads...)  */
    int lost;                        /* 1 once the device is lost                                    */
    const char *err;                 /* what error() reports (NULL: nothing went wrong)              */
} fault_hal;

static lw_status fh_info(void *ctx, lw_gpu_info *o) {
    *o = ((fault_hal *)ctx)->info;
    return LW_OK;
}
static lw_status fh_buffer_create(void *ctx, uint64_t size, uint32_t usage, const char *label,
                                  lw_gpu_buffer *out) {
    fault_hal *f = ctx;
    (void)usage, (void)label;
    if (f->n_buf + 1 >= FH_MAXO || size == 0 || size > f->info.max_buffer_size) return LW_ERR_INVALID_ARG;
    if (f->fail_buffer_at && f->n_buf + 1 == f->fail_buffer_at) {
        f->n_buf++; /* the id is used up, as a real device's failed creation */
        f->err = "out of memory (injected)";
        return LW_ERR_NOMEM;
    }
    *out = ++f->n_buf;
    f->buf_size[*out] = (size + 3) & ~3ull;
    f->live_buf++;
    f->live_bytes += f->buf_size[*out];
    if (f->live_bytes > f->max_bytes) f->max_bytes = f->live_bytes;
    return LW_OK;
}
static void fh_buffer_destroy(void *ctx, lw_gpu_buffer b) {
    fault_hal *f = ctx;
    if (!b || b > f->n_buf || !f->buf_size[b]) {
        f->bad++; /* destroying what is not live: a double free */
        return;
    }
    f->live_bytes -= f->buf_size[b];
    f->buf_size[b] = 0;
    f->live_buf--;
}
static int fh_range(const fault_hal *f, lw_gpu_buffer b, uint64_t off, uint64_t size) {
    return b && b <= f->n_buf && f->buf_size[b] && off <= f->buf_size[b] && size <= f->buf_size[b] - off;
}
static lw_status fh_buffer_write(void *ctx, lw_gpu_buffer b, uint64_t off, const void *data, uint64_t size) {
    fault_hal *f = ctx;
    (void)data;
    if (!fh_range(f, b, off, size)) f->bad++;
    return LW_OK;
}
static lw_status fh_buffer_write_host(void *ctx, lw_gpu_buffer b, uint64_t off, uint32_t host,
                                      uint64_t src_off, uint64_t size) {
    fault_hal *f = ctx;
    (void)host, (void)src_off;
    if (!fh_range(f, b, off, (size + 3) & ~3ull)) f->bad++;
    return LW_OK;
}
static lw_status fh_pipeline_create(void *ctx, const char *wgsl, const char *entry,
                                    const lw_gpu_binding_kind *kinds, uint32_t n, const char *label,
                                    lw_gpu_pipeline *out) {
    fault_hal *f = ctx;
    (void)kinds, (void)label;
    if (!wgsl || !entry || f->n_pipe + 1 >= FH_MAXO || n > LW_GPU_MAX_BINDINGS) return LW_ERR_INVALID_ARG;
    if (f->fail_pipeline_at && f->n_pipe + 1 == f->fail_pipeline_at) {
        f->n_pipe++;
        f->err = "WGSL 1:1: compilation failed (injected)";
        return LW_ERR_INVALID_ARG;
    }
    *out = ++f->n_pipe;
    f->n_kinds[*out] = n;
    return LW_OK;
}
static lw_status fh_bind_group_create(void *ctx, lw_gpu_pipeline p, const lw_gpu_bind *b, uint32_t n,
                                      lw_gpu_bind_group *out) {
    fault_hal *f = ctx;
    if (!p || p > f->n_pipe || n != f->n_kinds[p] || f->n_group + 1 >= FH_MAXO) return LW_ERR_INVALID_ARG;
    for (uint32_t i = 0; i < n; i++)
        if (!fh_range(f, b[i].buffer, b[i].offset, b[i].size)) f->bad++;
    if (f->fail_group_at && f->n_group + 1 == f->fail_group_at) {
        f->n_group++;
        f->err = "binding over the limit (injected)";
        return LW_ERR_INVALID_ARG;
    }
    *out = ++f->n_group;
    return LW_OK;
}
static void fh_dispatch(void *ctx, lw_gpu_pipeline p, lw_gpu_bind_group g, uint32_t dyn, uint32_t x,
                        uint32_t y, uint32_t z) {
    fault_hal *f = ctx;
    (void)dyn;
    if (!p || p > f->n_pipe || !g || g > f->n_group || !x || !y || !z) f->bad++;
    f->dispatches++;
}
static void fh_copy(void *ctx, lw_gpu_buffer s, uint64_t so, lw_gpu_buffer d, uint64_t dof, uint64_t n) {
    fault_hal *f = ctx;
    if (!fh_range(f, s, so, n) || !fh_range(f, d, dof, n)) f->bad++;
}
static lw_status fh_submit(void *ctx) {
    fault_hal *f = ctx;
    f->submits++;
    if (f->lose_at_submit && f->submits >= f->lose_at_submit) {
        f->lost = 1;
        f->err = "device lost (injected)";
    }
    return f->lost ? LW_ERR_IO : LW_OK;
}
static lw_status fh_read(void *ctx, lw_gpu_buffer b, uint64_t off, void *dst, uint64_t size) {
    fault_hal *f = ctx;
    if (!fh_range(f, b, off, size))
        f->bad++;
    else
        memset(dst, 0, (size_t)size); /* zeros: token 0, logits 0 */
    return f->lost ? LW_ERR_IO : LW_OK;
}
static uint32_t fh_pending(void *ctx) {
    (void)ctx;
    return 0;
}
static lw_status fh_wait(void *ctx) {
    return ((fault_hal *)ctx)->lost ? LW_ERR_IO : LW_OK;
}
static const char *fh_error(void *ctx) {
    return ((fault_hal *)ctx)->err;
}
static void fh_destroy(void *ctx) {
    (void)ctx; /* the test owns the fake and reads its counters afterwards */
}

static const lw_gpu_ops fault_hal_ops = {fh_info,
                                         fh_buffer_create,
                                         fh_buffer_destroy,
                                         fh_buffer_write,
                                         fh_buffer_write_host,
                                         fh_pipeline_create,
                                         fh_bind_group_create,
                                         fh_dispatch,
                                         fh_copy,
                                         fh_submit,
                                         fh_read,
                                         fh_pending,
                                         fh_wait,
                                         fh_error,
                                         fh_destroy};

/* Clears f and gives it lavapipe-like limits (4 GiB buffers, 128 MiB bindings, subgroups, no f16). */
static inline void fault_hal_init(fault_hal *f) {
    memset(f, 0, sizeof *f);
    f->info.max_buffer_size = 4294967295ull;
    f->info.max_storage_buffer_binding_size = 134217728;
    f->info.max_uniform_buffer_binding_size = 65536;
    f->info.min_storage_buffer_offset_alignment = 256;
    f->info.min_uniform_buffer_offset_alignment = 256;
    f->info.max_storage_buffers_per_shader_stage = 8;
    f->info.max_compute_workgroup_storage_size = 32768;
    f->info.max_compute_invocations_per_workgroup = 256;
    f->info.max_compute_workgroup_size_x = 256;
    f->info.max_compute_workgroups_per_dimension = 65535;
    f->info.has_subgroups = true;
}

#endif
