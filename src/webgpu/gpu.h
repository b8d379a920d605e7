/* The thin GPU HAL the WebGPU backend is written against: a table of functions plus a context pointer
 * (ggml-backend style), so the same kernel code runs over the project's JS glue in the wasm build
 * (web/lw-gpu.js + web/lw-gpu-wasm.c, today's WebGPU JS API in browsers and in Node + Dawn) and over a
 * native webgpu.h implementation where one exists.
 *
 * Model: objects are small integer handles (0 = none) owned by the HAL; everything is created at load
 * (invariant 2), and generation only records dispatches and copies, submits, and reads back.
 *   - Recording: dispatch() and copy() append to the current command encoder; consecutive dispatches share
 *     one compute pass (a copy ends it). submit() sends the recorded commands to the queue.
 *   - Host writes: buffer_write() copies from memory now (queue order); buffer_write_host() streams bytes
 *     from a byte source owned by the host (in the browser: an OPFS file, a File, a fetch stream) straight
 *     into the buffer in bounded chunks, so weights never pass through the wasm heap (invariant 1).
 *   - Read-back is asynchronous: read() schedules a copy of the range after the work submitted so far; the
 *     bytes land in dst once pending() is 0. Where the host can block, wait() does so; in the wasm build the
 *     JS caller awaits the glue's settle() between two calls into C (a step boundary, no Asyncify).
 *   - Errors of asynchronous work (validation, shader compilation, device loss) are sticky: error() returns
 *     the first one (NULL when none); the synchronous entries return lw_status as usual.
 * Sizes and offsets of writes, copies and reads must be multiples of 4 (WebGPU's rule); buffer sizes are
 * rounded up to 4 by the HAL. */
#ifndef LW_GPU_H
#define LW_GPU_H

#include "llamaweb.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ---------------------------------------------------------------------------------------------------------
 * Handles and enums
 * ------------------------------------------------------------------------------------------------------- */

typedef uint32_t lw_gpu_buffer;     /* a GPU buffer, 0 = none                           */
typedef uint32_t lw_gpu_pipeline;   /* a compute pipeline with its bind group layout    */
typedef uint32_t lw_gpu_bind_group; /* the buffers bound to one pipeline's group 0      */

/* Buffer usages (combine with |). Map-read staging for read() is the HAL's business. */
enum {
    LW_GPU_USAGE_STORAGE = 1u << 0,  /* bound as a storage buffer     */
    LW_GPU_USAGE_UNIFORM = 1u << 1,  /* bound as a uniform buffer     */
    LW_GPU_USAGE_COPY_SRC = 1u << 2, /* source of copy() and read()   */
    LW_GPU_USAGE_COPY_DST = 1u << 3, /* target of writes and copy()   */
    LW_GPU_USAGE_INDIRECT = 1u << 4, /* holds indirect dispatch args  */
};

/* What binding i of a pipeline's group 0 is (the explicit bind group layout). */
typedef enum lw_gpu_binding_kind {
    LW_GPU_BIND_STORAGE_READ = 0,    /* var<storage, read>                                        */
    LW_GPU_BIND_STORAGE = 1,         /* var<storage, read_write>                                  */
    LW_GPU_BIND_UNIFORM = 2,         /* var<uniform>                                              */
    LW_GPU_BIND_UNIFORM_DYNAMIC = 3, /* var<uniform> with a dynamic offset given at dispatch time */
} lw_gpu_binding_kind;

#define LW_GPU_MAX_BINDINGS 12u /* bindings per pipeline this HAL supports */

/* ---------------------------------------------------------------------------------------------------------
 * Device description
 * ------------------------------------------------------------------------------------------------------- */

/* What the adapter/device offers (the device is created with every feature below that the adapter has,
 * and with the adapter's maximum limits). */
typedef struct lw_gpu_info {
    char vendor[64];                                /* adapter info: "nvidia", "mesa", "google", ...      */
    char architecture[64];                          /* e.g. "swiftshader"                                 */
    char device[64];                                /* e.g. "llvmpipe (LLVM 19.1.7, 256 bits)"            */
    char description[128];                          /* free text from the driver                          */
    uint64_t max_buffer_size;                       /* largest buffer                                     */
    uint64_t max_storage_buffer_binding_size;       /* largest storage binding: weights are split by this */
    uint64_t max_uniform_buffer_binding_size;       /* largest uniform binding                            */
    uint32_t min_storage_buffer_offset_alignment;   /* binding offsets of storage buffers             */
    uint32_t min_uniform_buffer_offset_alignment;   /* binding and dynamic offsets of uniforms        */
    uint32_t max_storage_buffers_per_shader_stage;  /* storage bindings one kernel may use           */
    uint32_t max_compute_workgroup_storage_size;    /* bytes of var<workgroup>                       */
    uint32_t max_compute_invocations_per_workgroup; /* product of the workgroup size                */
    uint32_t max_compute_workgroup_size_x;          /* first dimension of @workgroup_size            */
    uint32_t max_compute_workgroups_per_dimension;  /* dispatch grid limit (65535 at least)          */
    uint32_t subgroup_min_size;                     /* 0 when unknown                                     */
    uint32_t subgroup_max_size;                     /* 0 when unknown                                     */
    bool has_f16;                                   /* feature shader-f16: `enable f16;` kernels          */
    bool has_subgroups;                             /* feature subgroups: `enable subgroups;` kernels     */
    bool has_timestamp_query;                       /* feature timestamp-query                            */
    bool has_dot4;                                  /* WGSL packed_4x8_integer_dot_product (dot4I8Packed) */
    uint32_t smx_m, smx_n, smx_k; /* i8 x i8 -> i32 subgroup matrices (chromium_experimental_subgroup_matrix)
                                     the device was made with: M x N x K (16 x 16 x 32), 0 without */
} lw_gpu_info;

/* One buffer range bound at a binding (size 0: from offset to the end of the buffer). */
typedef struct lw_gpu_bind {
    lw_gpu_buffer buffer; /* the buffer                                           */
    uint64_t offset;      /* bytes, a multiple of the device's offset alignment   */
    uint64_t size;        /* bytes visible to the kernel, 0 = the rest            */
} lw_gpu_bind;

/* ---------------------------------------------------------------------------------------------------------
 * The function table. Entries marked optional may be NULL.
 * ------------------------------------------------------------------------------------------------------- */

typedef struct lw_gpu_ops {
    /* Device and adapter properties. */
    lw_status (*info)(void *ctx, lw_gpu_info *out);

    /* Buffers. label is for debugging tools (may be NULL). Contents start zeroed. */
    lw_status (*buffer_create)(void *ctx, uint64_t size, uint32_t usage, const char *label,
                               lw_gpu_buffer *out);
    void (*buffer_destroy)(void *ctx, lw_gpu_buffer buf);
    /* Copies size bytes from host memory into buf at offset, in queue order (data may be reused at once). */
    lw_status (*buffer_write)(void *ctx, lw_gpu_buffer buf, uint64_t offset, const void *data, uint64_t size);
    /* Optional. Streams size bytes at src_offset of the host byte source host_source into buf at offset,
     * in chunks, without the bytes entering the caller's memory; completes asynchronously (pending()). */
    lw_status (*buffer_write_host)(void *ctx, lw_gpu_buffer buf, uint64_t offset, uint32_t host_source,
                                   uint64_t src_offset, uint64_t size);

    /* A compute pipeline from WGSL source with entry point entry and an explicit layout: group 0 has
     * n_bindings bindings 0..n-1 of the given kinds. Compilation errors surface through error() (and, when
     * the HAL can tell at once, as LW_ERR_INVALID_ARG). */
    lw_status (*pipeline_create)(void *ctx, const char *wgsl, const char *entry,
                                 const lw_gpu_binding_kind *kinds, uint32_t n_bindings, const char *label,
                                 lw_gpu_pipeline *out);
    /* Binds n buffer ranges (bindings 0..n-1) for pipeline's group 0. */
    lw_status (*bind_group_create)(void *ctx, lw_gpu_pipeline pipeline, const lw_gpu_bind *binds, uint32_t n,
                                   lw_gpu_bind_group *out);

    /* Records a dispatch of x*y*z workgroups. dyn_offset is the dynamic offset of the pipeline's
     * LW_GPU_BIND_UNIFORM_DYNAMIC binding (ignored when it has none). */
    void (*dispatch)(void *ctx, lw_gpu_pipeline pipeline, lw_gpu_bind_group group, uint32_t dyn_offset,
                     uint32_t x, uint32_t y, uint32_t z);
    /* Records a buffer-to-buffer copy (ends the current compute pass). */
    void (*copy)(void *ctx, lw_gpu_buffer src, uint64_t src_offset, lw_gpu_buffer dst, uint64_t dst_offset,
                 uint64_t size);
    /* Sends everything recorded since the last submit to the queue. */
    lw_status (*submit)(void *ctx);

    /* Schedules a read of size bytes of buf at offset into dst, after all work submitted so far (a pending
     * recording is submitted first). dst must stay valid until pending() is 0. */
    lw_status (*read)(void *ctx, lw_gpu_buffer buf, uint64_t offset, void *dst, uint64_t size);
    /* Asynchronous operations not finished yet (reads, host-source writes, error checks). */
    uint32_t (*pending)(void *ctx);
    /* Optional: blocks until pending() is 0. NULL where the host cannot block (wasm: JS awaits instead). */
    lw_status (*wait)(void *ctx);
    /* The first asynchronous error (validation, compilation, out of memory, device lost), or NULL. */
    const char *(*error)(void *ctx);

    /* Releases every object created through this table and the context itself. */
    void (*destroy)(void *ctx);
} lw_gpu_ops;

/* A HAL instance: the table and its context. */
typedef struct lw_gpu {
    const lw_gpu_ops *ops; /* the implementation */
    void *ctx;             /* its state          */
} lw_gpu;

#endif
