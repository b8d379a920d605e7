// The end of a mat-vec workgroup (matvec.wgsl, matvec-q8.wgsl): every invocation holds partial sums of the
// workgroup's ROWS rows; mv_store adds them up and writes y[y_offset + row0 + r]. With SUBGROUPS each subgroup
// adds its lanes with a subgroup sum and one lane per subgroup claims a slot with an atomic counter (WebGPU does not
// say how subgroups are laid out in a workgroup, so lid / subgroup_size would be a guess); otherwise a tree in
// workgroup memory, log2(WG_SIZE) barriers. The includer defines WG_SIZE, ROWS, SUBGROUPS and declares
// `y: array<f32>` and `params` with rows and y_offset.
#pragma once

#if SUBGROUPS
var<workgroup> sg_sums: array<f32, WG_SIZE * ROWS>; // ROWS slots per subgroup (at most one per invocation)
var<workgroup> sg_count: atomic<u32>;               // subgroups that stored sums (workgroup memory starts at 0)
#else
var<workgroup> partial: array<f32, WG_SIZE * ROWS>; // row r of invocation i at r * WG_SIZE + i
#endif

// Called by every invocation of the workgroup (uniform control flow); sg_lid is unused without SUBGROUPS.
fn mv_store(acc: ptr<function, array<f32, ROWS>>, row0: u32, lid: u32, sg_lid: u32) {
#if SUBGROUPS
    var s: array<f32, ROWS>;
    for (var r = 0u; r < ROWS; r++) {
        s[r] = subgroupAdd((*acc)[r]);
    }
    if (sg_lid == 0u) {
        let slot = atomicAdd(&sg_count, 1u);
        for (var r = 0u; r < ROWS; r++) {
            sg_sums[slot * ROWS + r] = s[r];
        }
    }
    workgroupBarrier();
    if (lid < ROWS && row0 + lid < params.rows) {
        let n = atomicLoad(&sg_count);
        var total = 0.0;
        for (var i = 0u; i < n; i++) {
            total += sg_sums[i * ROWS + lid];
        }
        y[params.y_offset + row0 + lid] = total;
    }
#else
    for (var r = 0u; r < ROWS; r++) {
        partial[r * WG_SIZE + lid] = (*acc)[r];
    }
    for (var s = WG_SIZE / 2u; s > 0u; s >>= 1u) {
        workgroupBarrier();
        if (lid < s) {
            for (var r = 0u; r < ROWS; r++) {
                partial[r * WG_SIZE + lid] += partial[r * WG_SIZE + lid + s];
            }
        }
    }
    workgroupBarrier();
    if (lid < ROWS && row0 + lid < params.rows) {
        y[params.y_offset + row0 + lid] = partial[lid * WG_SIZE];
    }
#endif
}
