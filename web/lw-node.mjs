// Node runner for the wasm build: loads build/wasm/llamaweb-wasm.{js,wasm} and creates a WebGPU device with
// the npm `webgpu` package (Dawn for Node), which runs on a CPU Vulkan driver (lavapipe, SwiftShader) or a
// real GPU. Pick the driver with VK_ICD_FILENAMES; a Dawn adapter name with LW_DAWN_ADAPTER.
//
// Dawn for Node aborts the process if the object create() returned is garbage-collected while a device is
// alive, and may not let the process exit on its own: keepAlive holds it, and callers end with
// process.exit() once their work is done.
import { readFileSync, existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';

const keepAlive = []; // create() results: must outlive every device (Dawn bug)

export function repoRoot() {
  return path.resolve(path.dirname(new URL(import.meta.url).pathname), '..');
}

// The wasm module (an Emscripten MODULARIZE factory) from build/wasm, or from $LW_WASM_DIR (relative to the
// repository root) when set, as scripts/build-wasm.sh. Returns null when it is not built.
export async function loadModule(dir = path.resolve(repoRoot(), process.env.LW_WASM_DIR || 'build/wasm')) {
  const js = path.join(dir, 'llamaweb-wasm.js'), wasm = path.join(dir, 'llamaweb-wasm.wasm');
  if (!existsSync(js) || !existsSync(wasm)) return null;
  const require = createRequire(import.meta.url);
  const factory = require(js);
  // Emscripten 3.1.6 would try fetch(path) under Node 20: hand it the bytes instead
  return factory({ wasmBinary: readFileSync(wasm), print: (s) => console.log(s), printErr: (s) => console.error(s) });
}

// navigator.gpu from Dawn, or null when the `webgpu` package is not installed.
export async function nodeGpu(args = []) {
  let webgpu;
  try {
    webgpu = await import('webgpu');
  } catch {
    return null;
  }
  Object.assign(globalThis, webgpu.globals); // GPUBufferUsage, GPUMapMode, GPUShaderStage, ...
  const adapterName = process.env.LW_DAWN_ADAPTER;
  // Dawn lists the matrix units (chromium-experimental-subgroup-matrix, prefill's int8 MMA) only with
  // allow_unsafe_apis; LW_GPU_SMX=0 leaves the toggle off (and with it the subgroup-matrix kernels)
  // LW_DAWN_FEATURES adds Dawn toggles to the same list (dawn.node reads one enable-dawn-features flag and
  // applies it to the instance, adapter and device), e.g. disable_robustness to measure what the bounds
  // clamps on every storage access cost; a browser tab always runs with them
  const extra = (process.env.LW_DAWN_FEATURES || '').split(',').filter(Boolean);
  const toggles = [...(process.env.LW_GPU_SMX !== '0' ? ['allow_unsafe_apis'] : []), ...extra];
  if (toggles.length) args = [...args, 'enable-dawn-features=' + toggles.join(',')];
  const gpu = webgpu.create(adapterName ? [...args, `adapter=${adapterName}`] : args);
  keepAlive.push(gpu);
  if (!globalThis.navigator) globalThis.navigator = {};
  if (!globalThis.navigator.gpu) Object.defineProperty(globalThis.navigator, 'gpu', { value: gpu, configurable: true });
  return gpu;
}

// Module + device ready for C: {Module, device, info} or {skip: reason}. gpuArgs: Dawn instance flags
// (lw-profile.mjs PROFILE_GPU_ARGS).
export async function setup(gpuArgs = []) {
  const Module = await loadModule();
  if (!Module) return { skip: 'build/wasm/llamaweb-wasm.* not built (scripts/build-wasm.sh)' };
  const gpu = await nodeGpu(gpuArgs);
  if (!gpu) return { skip: 'npm package webgpu not installed (scripts/setup-webgpu.sh)' };
  let device;
  try {
    device = await Module.lwGpu.requestDevice(gpu);
  } catch (e) {
    return { skip: 'no WebGPU adapter: ' + e.message + ' (install a Vulkan driver: scripts/setup-webgpu.sh)' };
  }
  Module.lwGpu.init(device);
  return { Module, device, info: Module.lwGpu.adapterInfo };
}
