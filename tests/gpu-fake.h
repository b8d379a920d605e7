/* A fake GPU HAL for the native WebGPU kernel tests: it records the last pipeline creation (WGSL, entry,
 * label, layout) instead of compiling, so tests check what a kernel family asks the HAL for without a
 * device; plus the limits of the two CPU adapters the web tests run on (TOOLCHAIN.md) and a reader of the
 * constants the templates expand. The kernels themselves run on real adapters in tests/web/. */
#ifndef LW_TEST_GPU_FAKE_H
#define LW_TEST_GPU_FAKE_H

#include "webgpu/gpu.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct fake_gpu {
    int creates;                                    /* pipeline_create calls                      */
    int fail_create;                                /* make pipeline_create fail                  */
    char wgsl[131072];                              /* WGSL of the last creation (grids included) */
    char entry[32];                                 /* its entry point                            */
    char label[80];                                 /* its label                                  */
    lw_gpu_binding_kind kinds[LW_GPU_MAX_BINDINGS]; /* its layout                                 */
    uint32_t n_kinds;                               /* bindings in it                             */
    const char *error;                              /* what error() reports                       */
} fake_gpu;

static inline lw_status fake_pipeline_create(void *ctx, const char *wgsl, const char *entry,
                                             const lw_gpu_binding_kind *kinds, uint32_t n, const char *label,
                                             lw_gpu_pipeline *out) {
    fake_gpu *f = ctx;
    f->creates++;
    snprintf(f->wgsl, sizeof f->wgsl, "%s", wgsl);
    snprintf(f->entry, sizeof f->entry, "%s", entry);
    snprintf(f->label, sizeof f->label, "%s", label ? label : "");
    f->n_kinds = n;
    memcpy(f->kinds, kinds, n * sizeof *kinds);
    if (f->fail_create) {
        f->error = "WGSL 12:3: expected ';'";
        *out = 0;
        return LW_ERR_INVALID_ARG;
    }
    *out = (lw_gpu_pipeline)(100 + f->creates);
    return LW_OK;
}
static inline const char *fake_error(void *ctx) {
    return ((fake_gpu *)ctx)->error;
}

static const lw_gpu_ops fake_ops = {.pipeline_create = fake_pipeline_create, .error = fake_error};

/* lavapipe's limits and features (shader-f16, subgroups, timestamp queries). */
static inline lw_gpu_info lavapipe_info(void) {
    lw_gpu_info i = {0};
    strcpy(i.vendor, "mesa");
    i.max_buffer_size = 4294967295ull;
    i.max_storage_buffer_binding_size = 134217728;
    i.min_storage_buffer_offset_alignment = 256;
    i.min_uniform_buffer_offset_alignment = 256;
    i.max_compute_workgroup_storage_size = 32768;
    i.max_compute_invocations_per_workgroup = 1024;
    i.max_compute_workgroup_size_x = 1024;
    i.max_compute_workgroups_per_dimension = 65535;
    i.has_f16 = i.has_subgroups = i.has_timestamp_query = true;
    i.has_dot4 = true; /* Dawn offers packed_4x8_integer_dot_product on lavapipe and SwiftShader */
    return i;
}
/* SwiftShader's: larger bindings, smaller workgroups, no shader-f16. */
static inline lw_gpu_info swiftshader_info(void) {
    lw_gpu_info i = lavapipe_info();
    i.max_storage_buffer_binding_size = 1073741824;
    i.max_compute_invocations_per_workgroup = 256;
    i.max_compute_workgroup_size_x = 256;
    i.has_f16 = false;
    return i;
}

/* Value of `const NAME: u32 = <expr>;` in wgsl when expr is a plain number (`12u`) or `a / b`, else -1. */
static inline long wgsl_const(const char *wgsl, const char *name) {
    char pat[64];
    snprintf(pat, sizeof pat, "const %s: u32 = ", name);
    const char *p = strstr(wgsl, pat);
    if (!p) return -1;
    char *end;
    long a = strtol(p + strlen(pat), &end, 10);
    if (strncmp(end, " / ", 3) == 0) return a / strtol(end + 3, NULL, 10);
    return a;
}

#endif
