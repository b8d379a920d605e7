// The end of a mat-vec workgroup (matvec.wgsl, matvec-q8.wgsl): every invocation holds partial sums of the
// workgroup's ROWS rows; mv_store adds them up and writes y[y_offset + row0 + r]. With SUBGROUPS each subgroup
// adds its lanes with a subgroup sum and its lowest invocation (subgroupMin of the index: WebGPU does not say how
// subgroups are laid out in a workgroup, so lid / subgroup_size would be a guess) stores them at its own index and
// sets its bit in a mask; the rows' totals add the subgroups' sums in the order of those bits. (The slots were
// once claimed with an atomic counter, so the sums added in the order the subgroups arrived: on the H100 the
// logits then differed by an ulp from run to run, and greedy decoding of a random-weight model parted after
// 13-53 tokens; tests/web/determinism.mjs.) Otherwise a tree in workgroup memory, log2(WG_SIZE) barriers. The
// includer defines WG_SIZE, ROWS, SUBGROUPS and declares `y: array<f32>` and `params` with rows and y_offset.
#pragma once

#if SUBGROUPS
var<workgroup> sg_sums: array<f32, WG_SIZE * ROWS>;              // the subgroup led by invocation i: at i * ROWS
var<workgroup> sg_lead: array<atomic<u32>, (WG_SIZE + 31u) / 32u>; // bit i: invocation i leads a subgroup
#else
var<workgroup> partial: array<f32, WG_SIZE * ROWS>; // row r of invocation i at r * WG_SIZE + i
#endif

// Called by every invocation of the workgroup (uniform control flow).
fn mv_store(acc: ptr<function, array<f32, ROWS>>, row0: u32, lid: u32) {
#if SUBGROUPS
    var s: array<f32, ROWS>;
    for (var r = 0u; r < ROWS; r++) {
        s[r] = subgroupAdd((*acc)[r]);
    }
    if (lid == subgroupMin(lid)) {
        for (var r = 0u; r < ROWS; r++) {
            sg_sums[lid * ROWS + r] = s[r];
        }
        atomicOr(&sg_lead[lid / 32u], 1u << (lid % 32u));
    }
    workgroupBarrier();
    if (lid < ROWS && row0 + lid < params.rows) {
        var total = 0.0;
        for (var w = 0u; w < (WG_SIZE + 31u) / 32u; w++) {
            var m = atomicLoad(&sg_lead[w]);
            while (m != 0u) {
                total += sg_sums[(w * 32u + firstTrailingBit(m)) * ROWS + lid];
                m &= m - 1u;
            }
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
