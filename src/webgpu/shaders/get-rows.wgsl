// Row gather with dequantization (graph op GET_ROWS: token embeddings): d[t] = row ids[t] of a weight
// table in any format of the WGSL dequantization table (dequant.wgsl, gpu-formats.c), as f32.
// A table larger than one binding (maxStorageBufferBindingSize) is split into parts of whole rows; one
// dispatch per part handles the tokens whose id lies in [row_base, row_base + row_count) and leaves the
// others alone, so the parts' dispatches together fill every row.
// One workgroup per token; its invocations stride over the row's chunks of 8 elements (dq_chunk).
// Defines: WEIGHT_TYPE (types.wgsl), WG_SIZE (default 64). Always f32 arithmetic (F16=0).
// Bindings: 0 w (read, the part's bytes as array<u32>), 1 ids (read_write, u32 token ids), 2 d
// (read_write, f32), 3 params. Dispatch: (groups_x, ceil(n_tokens / groups_x), 1).
// ROW_MAP 1 (a row store, ARCHITECTURE.md invariant 7): w holds only the resident rows, in slots, and binding
// 4 (read) maps each id to its slot (0xffffffff: not resident, fails the range check like an id of another
// part), so the gather reads slots[map[id]]; row_base / row_count then count slots. The host makes a step's
// rows resident before submitting it, or checks them afterwards (chained steps).
#include "common.wgsl"
#include "types.wgsl"
#ifndef WEIGHT_TYPE
#error get-rows.wgsl needs WEIGHT_TYPE
#endif
#ifndef WG_SIZE
#define WG_SIZE 64
#endif

struct GetRowsParams {
    n: u32,          // elements per row (a multiple of DQ_BLOCK)
    n_tokens: u32,   // ids to look up
    row_stride: u32, // bytes between rows of the table
    w_offset: u32,   // byte offset of row row_base in the w binding (even)
    row_base: u32,   // first row id held by this part
    row_count: u32,  // rows held by this part
    ids_offset: u32, // first id in the ids binding
    d_offset: u32,   // first element of d in its binding
    d_stride: u32,   // elements between rows of d
    groups_x: u32,   // workgroups along x of the grid
    pad0: u32,
    pad1: u32,
}

@group(0) @binding(0) var<storage, read> w: array<u32>;
@group(0) @binding(1) var<storage, read_write> ids: array<u32>;
@group(0) @binding(2) var<storage, read_write> rows_out: array<f32>; // named so no dequant routine's names clash
@group(0) @binding(3) var<uniform> params: GetRowsParams;
#if ROW_MAP
@group(0) @binding(4) var<storage, read> row_map: array<u32>;
#endif

#include "dequant.wgsl"

@compute @workgroup_size(WG_SIZE)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let t = wg.x + wg.y * params.groups_x;
    if (t >= params.n_tokens) {
        return;
    }
#if ROW_MAP
    let id = row_map[ids[params.ids_offset + t]];
#else
    let id = ids[params.ids_offset + t];
#endif
    if (id < params.row_base || id - params.row_base >= params.row_count) {
        return; // held by another part (or not a valid id)
    }
    let rb = params.w_offset + (id - params.row_base) * params.row_stride;
    let db = params.d_offset + t * params.d_stride;
    let n_chunks = (params.n / DQ_BLOCK) * DQ_CHUNKS;
    for (var i = lid; i < n_chunks; i += WG_SIZE) {
        let blk = i / DQ_CHUNKS;
        let c = i % DQ_CHUNKS;
        let q = dq_chunk(rb + blk * DQ_BYTES, c);
        let e = db + blk * DQ_BLOCK;
        let lo = vec4<f32>(q.lo);
        let hi = vec4<f32>(q.hi);
        for (var k = 0u; k < 4u; k++) {
            rows_out[e + dq_lo_at(c) + k] = lo[k];
            rows_out[e + dq_hi_at(c) + k] = hi[k];
        }
    }
}
