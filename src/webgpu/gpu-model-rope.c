/* RoPE angles from the host: the CPU's sin/cos table (lw__rope_cache, engine-ops.c) of each distinct RoPE
 * configuration for the positions of a step, written to one GPU buffer before the step is recorded, so the
 * rotations on the GPU use the CPU's cosf/sinf bits. The kernel's own sincos (rope-common.wgsl) is within
 * an ulp of the libm and differed in a tenth to a third of the elements (tests/web/ops.test.mjs), which a
 * model carries into its KV cache. Work per step: n_rot / 2 cosf + sinf per token and configuration.
 * ROPE nodes with frequency factors keep computing their angles on the GPU (the factors are weights, which
 * do not pass through the host on this path). */
#include "cpu/engine-ops.h"
#include "webgpu/gpu-model-impl.h"

#include <string.h>

/* Whether ROPE nodes a and b build the same table (n_rot and the angle parameters). */
static bool same_angles(const lw__node *a, const lw__node *b) {
    return a->ip[2] == b->ip[2] && memcmp(a->fp, b->fp, 6 * sizeof a->fp[0]) == 0;
}

lw_status lw__gm_plan_rope(lw__gpu_model *g) {
    g->n_rope = 0;
    g->rope_pairs = 0;
    for (int32_t i = 0; i < g->graph.n_nodes; i++) {
        const lw__node *nd = &g->graph.nodes[i];
        g->nodes[i].rope_cfg = -1;
        if (nd->op != LW_OP_ROPE || nd->src[1] >= 0 || nd->ip[2] <= 0) continue;
        uint32_t c = 0;
        while (c < g->n_rope && !same_angles(&g->graph.nodes[g->rope_node[c]], nd)) c++;
        if (c == g->n_rope) {
            if (c == GM_ROPE_CONFIGS) continue;
            g->rope_node[g->n_rope++] = i;
            if ((uint32_t)nd->ip[2] / 2 > g->rope_pairs) g->rope_pairs = (uint32_t)nd->ip[2] / 2;
        }
        g->nodes[i].rope_cfg = (int8_t)c;
    }
    if (!g->n_rope) return LW_OK;
    uint64_t floats; /* n_rope x n_batch x rope_pairs x 2 */
    if (!lw__mul_u64((uint64_t)g->n_rope * g->n_batch, (uint64_t)g->rope_pairs * 2, &floats) ||
        floats > UINT32_MAX / 4 || floats * 4 > lw__gm_bind_max(&g->info))
        return lw__errorf(g->err, LW_ERR_TOO_LARGE, "the RoPE table of %u-token steps exceeds a binding",
                          g->n_batch);
    g->rope_host = lw__calloc(&g->alloc, (size_t)g->n_batch * g->rope_pairs * 2, sizeof(float));
    if (!g->rope_host) return lw__errorf(g->err, LW_ERR_NOMEM, "out of memory");
    return lw__gm_new_buffer(g, floats * 4, LW_GPU_USAGE_STORAGE | LW_GPU_USAGE_COPY_DST, "rope table",
                             &g->rope_tab);
}

lw_gpu_bind lw__gm_rope_bind(const lw__gpu_model *g, int32_t i, lw_gpu_bind ff) {
    return g->nodes[i].rope_cfg >= 0 ? lw__gm_whole(g->rope_tab) : ff;
}

void lw__gm_rope_table_args(const lw__gpu_model *g, int32_t i, lw__gpu_rope_args *a) {
    const int32_t c = g->nodes[i].rope_cfg;
    if (c < 0) return;
    a->table = true;
    a->ff_offset = (uint64_t)c * g->n_batch * g->rope_pairs * 2;
}

lw_status lw__gm_write_rope(lw__gpu_model *g, int32_t n_tokens, int32_t pos0) {
    for (uint32_t c = 0; c < g->n_rope; c++) {
        const lw__node *nd = &g->graph.nodes[g->rope_node[c]];
        const int64_t pairs = nd->ip[2] / 2;
        for (int32_t r = 0; r < n_tokens; r++)
            lw__rope_cache(nd, NULL, (int64_t)pos0 + r, pairs, g->rope_host + (size_t)r * (size_t)pairs * 2);
        const uint64_t off = (uint64_t)c * g->n_batch * g->rope_pairs * 2 * 4;
        lw_status st = g->inner.ops->buffer_write(g->inner.ctx, g->rope_tab, off, g->rope_host,
                                                  (uint64_t)n_tokens * (uint64_t)pairs * 2 * 4);
        if (st != LW_OK) return lw__errorf(g->err, st, "writing the RoPE table failed");
    }
    return LW_OK;
}
