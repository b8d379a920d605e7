// One fragment column of matmat-smx.wgsl's K sub-step (included once per column, no #pragma once): the W
// digits of rows (sr RF + RFI) 16 .. + 16 as right matrices, multiplied into the accumulators of that column
// for the TF token fragments (xh0 / xl0, xh1 / xl1 of the includer). Names from the includer: RFI (the
// column), A0H A0X (token fragment 0's accumulators), A1H A1X (fragment 1's, TF > 1).
{
    let o = p * TW + (sr * RF + RFI) * 16u * WSP + 8u * kk;
    let rh = subgroupMatrixLoad<subgroup_matrix_right<i8, 16, 32>, col_major>(&wh, o, WSP);
    let rl = subgroupMatrixLoad<subgroup_matrix_right<i8, 16, 32>, col_major>(&wl, o, WSP);
    A0H = subgroupMatrixMultiplyAccumulate(xh0, rh, A0H);
    A0X = subgroupMatrixMultiplyAccumulate(xh0, rl, A0X);
    A0X = subgroupMatrixMultiplyAccumulate(xl0, rh, A0X);
#if TF > 1
    A1H = subgroupMatrixMultiplyAccumulate(xh1, rh, A1H);
    A1X = subgroupMatrixMultiplyAccumulate(xh1, rl, A1X);
    A1X = subgroupMatrixMultiplyAccumulate(xl1, rh, A1X);
#endif
}
