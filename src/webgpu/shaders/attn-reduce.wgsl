// Merges the split partials of attn-decode.wgsl into the output: one workgroup per (query head, token);
// invocations take vec4 lanes of the head. With M the largest split max, the output is
// sum_s V_s * exp(m_s - M) / sum_s l_s * exp(m_s - M) (empty splits have m = NEG, l = 0, V = 0).
// Defines: attn-common.wgsl's. Dispatch: (n_head, tokens, 1).
#include "attn-common.wgsl"

@compute @workgroup_size(WG_SIZE)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let h = wg.x;
    let t = wg.y;
    let ns = params.n_splits;
    let pb = (t * params.n_head + h) * ns * (D4 + 1u);
    var mx = NEG;
    for (var s = 0u; s < ns; s++) {
        mx = max(mx, part[pb + s * (D4 + 1u)].x);
    }
    var sum = 0.0;
    for (var s = 0u; s < ns; s++) {
        let ml = part[pb + s * (D4 + 1u)];
        sum += ml.y * ex(ml.x - mx);
    }
    let inv = select(0.0, 1.0 / sum, sum > 0.0);
    for (var lane = lid; lane < D4; lane += WG) {
        var acc = vec4<f32>(0.0);
        for (var s = 0u; s < ns; s++) {
            let ps = pb + s * (D4 + 1u);
            acc += part[ps + 1u + lane] * ex(part[ps].x - mx);
        }
        o[params.o_offset + t * params.o_stride + h * D4 + lane] = acc * inv;
    }
}
