// The decode profiler (web/lw-profile.mjs, the glue's lwGpu.profileStart/profileRead; `node web/cli.mjs
// profile`) on a tiny synthetic model: its table accounts for every dispatch of a decode step (calls per token
// = the dispatches a plain step records, by the glue's counters), times are positive where the device has
// timestamps, profiling changes no token, and neither plain nor profiled decode steps create GPU objects.
// Run: LW_WASM_DIR=... LW_CLI=... VK_ICD_FILENAMES=... node --test tests/web/profile.test.mjs
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { setup, repoRoot } from '../../web/lw-node.mjs';
import { GpuModel, fileSource } from '../../web/lw-model.mjs';
import { profile, formatProfile, PROFILE_GPU_ARGS } from '../../web/lw-profile.mjs';

const ctx = await setup(PROFILE_GPU_ARGS);
const M = ctx.Module;
const cli = [process.env.LW_CLI, ...['build/release', 'build'].map((d) => path.join(repoRoot(), d, 'llamaweb'))]
  .find((p) => p && existsSync(p));
const skip = ctx.skip || (!cli && 'llamaweb CLI not built (LW_CLI)') || false;
if (skip) console.log('SKIP: ' + skip);
const tmp = mkdtempSync(path.join(process.env.LW_TMP || os.tmpdir(), 'lw-profile-'));
after(() => rmSync(tmp, { recursive: true, force: true }));

// What a step creates would show here (invariant 2: nothing during generation).
const created = () => {
  const c = M.lwGpu.counters;
  return { buffers: c.buffers, staging: c.stagingBuffers, pipelines: c.pipelines, bindGroups: c.bindGroups, querySets: c.querySets };
};

test('profile: calls per token = dispatches per step, times, same tokens, nothing created per token', { skip }, async () => {
  const file = path.join(tmp, 'tiny-q4_0.gguf');
  execFileSync(cli, ['synth', '--preset', 'tiny', '--type', 'q4_0', '--vocab', 'builtin', '-o', file]);
  const src = fileSource(file);
  const m = await GpuModel.open(M, src, { nCtx: 64 });
  try {
    // a plain step's dispatches, counted by the glue (the graph's and the argmax's)
    let next = await m.decode([1, 2, 3]);
    next = await m.decode([next]);
    const d0 = M.lwGpu.counters.dispatches, c0 = created();
    next = await m.decode([next]);
    const perStep = M.lwGpu.counters.dispatches - d0;
    assert.deepEqual(created(), c0, 'a plain decode step created GPU objects');
    assert.ok(perStep >= m.info().stepDispatches && m.info().stepDispatches > 0, `${perStep} dispatches per step`);

    const r = await profile(M, m, { nPrompt: 5, nGen: 3 });
    console.log(formatProfile(r).join('\n'));
    assert.equal(r.dispatchesPerToken, perStep);
    const calls = r.rows.reduce((s, w) => s + w.calls, 0);
    assert.equal(calls, perStep, 'calls per token over the table');
    for (const w of r.rows) {
      assert.ok(Number.isInteger(w.calls) && w.calls > 0, `${w.label}: ${w.calls} calls per token`);
      assert.ok(w.cpuUs > 0, `${w.label}: JS time ${w.cpuUs}`);
      assert.ok(typeof w.label === 'string' && w.label.length > 0);
    }
    assert.ok(r.wall.tgMsPerToken > 0 && r.wall.syncMsPerToken > 0 && r.wall.syncMsPerToken < r.wall.tgMsPerToken);
    assert.ok(r.cpu.dispatchMsPerToken > 0 && r.cpu.submitMsPerToken > 0);
    const hasTs = ctx.device.features.has('timestamp-query');
    assert.equal(r.timestamps, hasTs);
    if (hasTs) {
      assert.equal(r.gpu.untimed, 0);
      assert.equal(r.quantized, false, 'timestamps quantized: PROFILE_GPU_ARGS did not reach the device');
      for (const w of r.rows) assert.ok(w.gpuUs > 0, `${w.label}: GPU time ${w.gpuUs}`);
      const share = r.rows.reduce((s, w) => s + w.share, 0);
      assert.ok(Math.abs(share - 1) < 1e-9, `shares sum to ${share}`);
      assert.ok(r.gpu.spanUsPerToken >= r.gpu.sumUsPerToken * 0.999, 'span of the step shorter than its kernels');
      assert.ok(r.ppRows.length > 0 && r.gpu.ppSumMs > 0);
      assert.deepEqual(r.tokens.gpu, r.tokens.plain, 'tokens with GPU timestamps');
    } else {
      console.log('no timestamp-query on this adapter: only the CPU side was profiled');
    }
    assert.deepEqual(r.tokens.cpu, r.tokens.plain, 'tokens with the CPU profile');

    // profiling once made its query set; profiled steps then create nothing
    const g = M.lwGpu;
    g.profileStart({ gpu: true });
    try {
      await m.decode([next]);
      await g.profileRead();
      const c1 = created();
      next = await m.decode([next]);
      const rec = await g.profileRead();
      assert.deepEqual(created(), c1, 'a profiled decode step created GPU objects');
      assert.equal(rec.labels.length, perStep);
      assert.equal(rec.timed, hasTs ? perStep : 0);
    } finally {
      g.profileStop();
    }
    assert.equal(M.lwGpu.prof, null);

    // lwGpu.skip (web/cli.mjs --skip): a step leaves out exactly the matching kernel's dispatches
    const w0 = r.rows[0], esc = w0.label.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
    g.skip = new RegExp('^' + esc + '$');
    try {
      const d1 = g.counters.dispatches, s1 = g.counters.skipped || 0;
      next = await m.decode([next]);
      assert.equal(g.counters.dispatches - d1, perStep - w0.calls, `dispatches with ${w0.label} skipped`);
      assert.equal((g.counters.skipped || 0) - s1, w0.calls);
    } finally {
      g.skip = null;
    }
    const err = await M.lwGpu.settle();
    assert.equal(err, null);
  } finally {
    m.free();
    src.close();
  }
});
