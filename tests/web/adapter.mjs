// Which CPU Vulkan driver a test file runs on (scripts/test-webgpu.sh runs the Node tests on both), so that
// a heavy case whose logic does not depend on the driver runs on the one that compiles it fastest in CI
// (LW_TEST_SLOW=1: every case on every driver). info: GPUAdapterInfo (ctx.info of web/lw-node.mjs setup).
const text = (info) => (info ? [info.vendor, info.architecture, info.device, info.description].join(' ') : '');

export const isSwiftShader = (info) => /swiftshader/i.test(text(info));
export const isLavapipe = (info) => /llvmpipe|lavapipe/i.test(text(info));
