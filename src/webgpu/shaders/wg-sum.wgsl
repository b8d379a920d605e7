// The sum of one f32 per invocation over a workgroup, the same value in every invocation (rms-norm.wgsl,
// matvec-q8-norm.wgsl). With SUBGROUPS every subgroup adds up all WG_SIZE partials (lane l takes l,
// l + sg_size, ...: no assumption on how the invocations map to subgroups, and one barrier instead of
// log2(WG_SIZE)), then subgroupAdd; else a tree in workgroup memory. Called in uniform control flow; the
// includer defines WG_SIZE (a power of two without SUBGROUPS) and SUBGROUPS.
#pragma once

var<workgroup> wg_sum_part: array<f32, WG_SIZE>; // the invocations' partials (then the tree's)

#if SUBGROUPS
fn wg_sum(v: f32, lid: u32, sg_lid: u32, sg_size: u32) -> f32 {
    wg_sum_part[lid] = v;
    workgroupBarrier();
    var t = 0.0f;
    for (var j = sg_lid; j < WG_SIZE; j += sg_size) {
        t += wg_sum_part[j];
    }
    return subgroupAdd(t);
}
#else
fn wg_sum(v: f32, lid: u32) -> f32 {
    wg_sum_part[lid] = v;
    workgroupBarrier();
    for (var s = WG_SIZE / 2u; s > 0u; s >>= 1u) {
        if (lid < s) {
            wg_sum_part[lid] += wg_sum_part[lid + s];
        }
        workgroupBarrier();
    }
    return wg_sum_part[0];
}
#endif
