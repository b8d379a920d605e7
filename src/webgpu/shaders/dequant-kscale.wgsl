// The 6-bit scales and mins of Q4_K and Q5_K (ggml's get_scale_min_k4): 12 bytes s = (s0, s1, s2) as words
// hold 8 (scale, min) pairs; pair j < 4 is (s0 byte j & 63, s1 byte j & 63), pair j >= 4 is
// (s2 byte j-4 low nibble | (s0 byte j-4 >> 6) << 4, s2 byte j-4 high nibble | (s1 byte j-4 >> 6) << 4).
// Chunks of these formats need the two pairs j = 2g and 2g + 1 of one 64-element group g, so only those two
// are unpacked, side by side.
#pragma once

// (scale, min) of pairs 2g and 2g + 1: .xy = scales, .zw = mins. Branch-free (neighbouring invocations
// often have different g).
fn kscale_pairs(s: vec3<u32>, g: u32) -> vec4<u32> {
    let sh = vec2<u32>(16u * (g & 1u), 16u * (g & 1u) + 8u); // bytes 2 (g % 2) and 2 (g % 2) + 1
    let s0 = vec2<u32>(s.x) >> sh;
    let s1 = vec2<u32>(s.y) >> sh;
    let s2 = vec2<u32>(s.z) >> sh;
    let high = g >= 2u;
    // bits 6-7 of the bytes of s0 / s1 become bits 4-5: (b >> 2) & 0x30
    let sc = select(s0 & vec2<u32>(63u), (s2 & vec2<u32>(15u)) | ((s0 >> vec2<u32>(2u)) & vec2<u32>(0x30u)), high);
    let mn = select(s1 & vec2<u32>(63u), ((s2 >> vec2<u32>(4u)) & vec2<u32>(15u)) | ((s1 >> vec2<u32>(2u)) & vec2<u32>(0x30u)), high);
    return vec4<u32>(sc, mn);
}
