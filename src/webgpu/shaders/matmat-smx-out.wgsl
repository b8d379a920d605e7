// One fragment of matmat-smx.wgsl's end (included once per fragment, no #pragma once): its two accumulators
// through the subgroup's 16 x 16 of STAGE, then y = ux uw (65536 hh + 256 x) for the elements this lane
// takes. Names from the includer: TFI, RFI (the fragment), AH, AX (its accumulators).
{
    subgroupMatrixStore<row_major>(&STAGE, sid * 256u, AH, 16u);
    workgroupBarrier();
    var hv: array<i32, 8>;
    for (var e = 0u; e < 8u; e++) {
        hv[e] = STAGE[sid * 256u + lane + 32u * e];
    }
    workgroupBarrier();
    subgroupMatrixStore<row_major>(&STAGE, sid * 256u, AX, 16u);
    workgroupBarrier();
    let row = row0 + (sr * RF + RFI) * 16u + ec;
    let uw = bitcast<f32>(qword(wmax0 + min(row, params.rows - 1u))) * (65536.0 / FULL);
    for (var e = 0u; e < 8u; e++) {
        let tok = tok0 + (st * TF + TFI) * 16u + er + 2u * e;
        let xv = STAGE[sid * 256u + lane + 32u * e];
        if (tok < params.tokens && row < params.rows) {
            let ux = bitcast<f32>(qword(xmax0 + tok)) * (1.0 / FULL);
            y[params.y_offset + tok * params.y_stride + row] = (f32(hv[e]) + f32(xv) * (1.0 / 256.0)) * (uw * ux);
        }
    }
    workgroupBarrier();
}
