// Fuzzing the browser package's own GGUF readers (web/lw-sources.mjs): parseGgufHeader / readGgufHeader on
// mutated single files and splitSource on mutated split GGUF parts (llama.cpp's gguf-split layout, written
// by tests/web/gguf-split.mjs from the committed synthetic seed models, tests/fuzz/seeds/model). Mutations,
// from a seeded generator (runs repeat): byte flips and random bytes in the headers, 64-bit counts and
// offsets set to 0 / 2^32 / 2^53 / 2^64-1, truncation (also inside a header), parts dropped, doubled,
// swapped or taken from another split. Invariants: every input ends (no hang) in a source or a
// LlamawebError with a public code (never a TypeError or RangeError); a merged source reads every range
// inside its size, and every tensor range its header announces either lies inside the source or the
// loader's own check (C, in the wasm module, or the native fuzz-gguf target) refuses it. No GPU, no wasm.
// CI: 400 inputs (about a second); LW_FUZZ_ITERS=N runs N (scripts/fuzz.sh is the C side's).
// Run: node --test tests/web/split-fuzz.test.mjs
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, readFileSync, readdirSync } from 'node:fs';
import path from 'node:path';
import { repoRoot } from '../../web/lw-node.mjs';
import { bytesSource } from '../../web/lw-model.mjs';
import { LlamawebError } from '../../web/llamaweb.mjs';
import { splitSource, parseGgufHeader, readGgufHeader } from '../../web/lw-sources.mjs';
import { ggufSplit } from './gguf-split.mjs';

const seedDir = path.join(repoRoot(), 'tests/fuzz/seeds/model');
const seeds = existsSync(seedDir) ? readdirSync(seedDir).filter((f) => f.endsWith('.gguf')).sort().map((f) => new Uint8Array(readFileSync(path.join(seedDir, f)))) : [];
const skip = seeds.length ? false : `no seed models in ${seedDir} (scripts/fuzz-seeds.sh)`;
if (skip) console.log('SKIP: ' + skip);
const ITERS = Number(process.env.LW_FUZZ_ITERS || 400);
const PUBLIC = new Set(['GPU_UNAVAILABLE', 'UNSUPPORTED_MODEL', 'NOT_ENOUGH_MEMORY', 'NETWORK', 'QUOTA_EXCEEDED', 'ABORTED', 'CONTEXT_FULL', 'BAD_INPUT']);

// xorshift32: the same seed, the same inputs
function rng(seed) {
  let s = seed >>> 0 || 1;
  const next = () => { s ^= s << 13; s >>>= 0; s ^= s >>> 17; s ^= s << 5; s >>>= 0; return s; };
  return { int: (n) => next() % n, pick: (a) => a[next() % a.length] };
}

const SPECIAL64 = [0n, 1n, 2n ** 32n, 2n ** 32n - 1n, 2n ** 53n, 2n ** 63n, 2n ** 64n - 1n, 255n];

// One mutation of bytes b (a copy), mostly inside its header (where the parsers look).
function mutate(b, r, headerEnd) {
  const out = new Uint8Array(b);
  const span = Math.max(8, Math.min(out.length, headerEnd + 64));
  const n = 1 + r.int(4);
  for (let k = 0; k < n; k++) {
    const at = r.int(span);
    switch (r.int(4)) {
      case 0: out[at] ^= 1 << r.int(8); break;
      case 1: out[at] = r.int(256); break;
      case 2: if (at + 8 <= out.length) new DataView(out.buffer).setBigUint64(at, r.pick(SPECIAL64), true); break;
      default: if (at + 4 <= out.length) new DataView(out.buffer).setUint32(at, r.pick([0, 1, 8, 9, 12, 13, 0xffffffff, 0x80000000]), true);
    }
  }
  return r.int(5) === 0 ? out.subarray(0, r.int(out.length + 1)) : out;
}

// What every failure must be.
function typed(e, what) {
  assert.ok(e instanceof LlamawebError, `${what}: ${e && e.constructor && e.constructor.name}: ${e && e.message}\n${e && e.stack}`);
  assert.ok(PUBLIC.has(e.code), `${what}: code ${e.code}`);
}

// A merged or single source: its header, every announced tensor range that fits, reads at the edges.
async function exercise(src, what) {
  let h;
  try {
    ({ h } = await readGgufHeader(src, 4096));
  } catch (e) {
    typed(e, what + ': readGgufHeader');
    return 'refused';
  }
  for (const t of h.tensors) {
    const at = h.dataStart + t.offset;
    if (at >= src.size) continue; // the loader refuses it (its own out-of-file check)
    const len = Math.min(64, src.size - at);
    const got = await src.read(at, len);
    assert.equal(got.length, len, `${what}: tensor ${t.name}: ${got.length} of ${len} bytes`);
  }
  if (src.size > 0) assert.equal((await src.read(src.size - 1, 1)).length, 1);
  return 'read';
}

test('parseGgufHeader / readGgufHeader on mutated files: a header or a typed error', { skip }, async () => {
  const r = rng(12345);
  const seen = { read: 0, refused: 0 };
  for (let i = 0; i < ITERS; i++) {
    const base = seeds[i % seeds.length];
    const h0 = parseGgufHeader(base);
    const b = mutate(base, r, h0.headerEnd);
    try {
      parseGgufHeader(b, 'fuzz');
    } catch (e) {
      if (e.message !== 'short header') typed(e, `input ${i}: parseGgufHeader`);
    }
    seen[await exercise(bytesSource(b), `input ${i}`)]++;
  }
  console.log(`# single files: ${ITERS} mutated inputs: ${seen.read} read, ${seen.refused} refused with a typed error`);
});

test('splitSource on mutated parts: a source that reads in bounds or a typed error', { skip }, async () => {
  const r = rng(67890);
  const seen = { read: 0, refused: 0, split: 0 };
  const splits = seeds.map((s, k) => ggufSplit(s, 3 + (k % 3), `m${k}`));
  for (let i = 0; i < ITERS; i++) {
    const k = i % splits.length;
    let parts = splits[k].map((p) => ({ name: p.name, bytes: p.bytes }));
    const j = r.int(parts.length);
    const what = r.int(6);
    if (what <= 2) parts[j] = { ...parts[j], bytes: mutate(parts[j].bytes, r, parseGgufHeader(parts[j].bytes).headerEnd) };
    else if (what === 3) parts.splice(j, 1);
    else if (what === 4) parts.push(parts[j]);
    else parts[j] = splits[(k + 1) % splits.length][0]; // a part of another split
    if (r.int(2)) parts = parts.reverse();
    let src;
    try {
      src = await splitSource(parts.map((p) => ({ ...bytesSource(p.bytes), name: p.name })));
    } catch (e) {
      typed(e, `input ${i}: splitSource`);
      seen.refused++;
      continue;
    }
    seen.split++;
    try {
      seen[await exercise(src, `input ${i}`)]++;
    } catch (e) {
      if (e && e.code === 'ERR_ASSERTION') throw e;
      typed(e, `input ${i}: reading the merged source`); // a part cut off: a read past its end is refused
      seen.refused++;
    }
  }
  console.log(`# split parts: ${ITERS} mutated inputs: ${seen.split} merged (${seen.read} read through), ${seen.refused} refused with a typed error`);
});

// Regressions of what the fuzzing found (web/lw-sources.mjs):
test('regression: a small scalar at the very end of a header prefix is a short header, not a RangeError', { skip }, () => {
  const h = parseGgufHeader(seeds[0]);
  // every prefix that ends inside the header: the parser asks for more bytes or refuses, typed
  for (let n = 0; n < h.headerEnd; n++) {
    try {
      parseGgufHeader(seeds[0].subarray(0, n));
    } catch (e) {
      if (e.message !== 'short header') typed(e, `prefix ${n}`);
    }
  }
});

test('regression: a cut-off split part fails its reads with UNSUPPORTED_MODEL', { skip }, async () => {
  const parts = ggufSplit(seeds[0], 4, 'cut');
  const whole = await splitSource(parts.map((p) => ({ ...bytesSource(p.bytes), name: p.name })));
  const { h } = await readGgufHeader(whole);
  // the first part's last tensor (the 4th) up to where the 5th starts, read after that part lost 40 bytes
  const from = h.dataStart + h.tensors[3].offset, len = h.tensors[4].offset - h.tensors[3].offset;
  assert.equal((await whole.read(from, len)).length, len);
  parts[0] = { ...parts[0], bytes: parts[0].bytes.subarray(0, parts[0].bytes.length - 40) };
  const src = await splitSource(parts.map((p) => ({ ...bytesSource(p.bytes), name: p.name })));
  const e = await Promise.resolve().then(() => src.read(from, len)).then(() => null, (x) => x);
  assert.ok(e, 'a read past the cut part\'s end succeeded');
  typed(e, 'read past a cut part');
  assert.equal(e.code, 'UNSUPPORTED_MODEL');
});
