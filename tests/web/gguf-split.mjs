// Test helper: split GGUF parts as llama.cpp's gguf-split writes them (tools/gguf-split, --split-max-tensors
// N), from a whole GGUF file in memory. Part k (0-based) of n: GGUF v3 header; part 0 carries every key of
// the input followed by split.no (u16 k), split.count (u16 n) and split.tensors.count (i32, all tensors),
// the other parts only those three keys; then the part's tensor infos (offsets from its own data section),
// zero padding to 32 bytes, and each tensor's bytes padded with zeros to 32. Names: PREFIX-0000k-of-0000n.gguf
// (llama_split_path). Tensor sizes come from the input's layout (the next tensor's offset, or the file's
// end), which for a 32-byte-aligned input with zero padding is the padded size gguf-split writes. llama.cpp
// v0.4.0 (libllama of node-llama-cpp) loads stories260K's 3 parts made here from the first part's path with
// logits identical to the whole file's (and refuses them with a part missing).
import { parseGgufHeader } from '../../web/lw-sources.mjs';

const enc = new TextEncoder();

function bytesOf(parts) {
  const out = new Uint8Array(parts.reduce((s, p) => s + p.length, 0));
  let at = 0;
  for (const p of parts) { out.set(p, at); at += p.length; }
  return out;
}

function num(bits, v) {
  const b = new Uint8Array(bits / 8), dv = new DataView(b.buffer);
  if (bits === 16) dv.setUint16(0, v, true);
  else if (bits === 32) dv.setInt32(0, v, true);
  else dv.setBigUint64(0, BigInt(v), true);
  return b;
}

const str = (s) => { const b = enc.encode(s); return bytesOf([num(64, b.length), b]); };
const kvU16 = (k, v) => bytesOf([str(k), num(32, 2), num(16, v)]);
const kvI32 = (k, v) => bytesOf([str(k), num(32, 5), num(32, v)]);

// The parts' layout from a GGUF header alone (head: at least the header's bytes; fileSize: the whole file's):
// [{name, head (header bytes with padding), dataStart, size, from (the input offset of the part's first data
// byte)}]. A part's byte at dataStart + d is the input's byte at from + d.
export function ggufSplitLayout(head, fileSize, maxTensors, prefix = 'model') {
  const h = parseGgufHeader(head);
  if (h.alignment !== 32) throw new Error('ggufSplit: the input must be 32-byte aligned (as gguf-split writes parts)');
  const T = h.tensors, total = T.length;
  const n = Math.max(1, Math.ceil(total / maxTensors));
  const extent = (i) => (i + 1 < total ? T[i + 1].offset : fileSize - h.dataStart) - T[i].offset;
  const parts = [];
  for (let k = 0; k < n; k++) {
    const mine = T.map((t, i) => ({ t, i })).slice(k * maxTensors, (k + 1) * maxTensors);
    const kv = k === 0 ? h.kv.map((x) => head.subarray(x.start, x.end)) : [];
    kv.push(kvU16('split.no', k), kvU16('split.count', n), kvI32('split.tensors.count', total));
    const infos = [];
    let off = 0;
    for (const { t, i } of mine) {
      infos.push(head.subarray(t.start, t.end - 8), num(64, off));
      off += Math.ceil(extent(i) / 32) * 32;
    }
    const bare = bytesOf([enc.encode('GGUF'), num(32, 3), num(64, mine.length), num(64, kv.length), ...kv, ...infos]);
    const hb = bytesOf([bare, new Uint8Array(Math.ceil(bare.length / 32) * 32 - bare.length)]);
    const name = `${prefix}-${String(k + 1).padStart(5, '0')}-of-${String(n).padStart(5, '0')}.gguf`;
    parts.push({ name, head: hb, dataStart: hb.length, size: hb.length + off, from: h.dataStart + (mine.length ? mine[0].t.offset : 0) });
  }
  return parts;
}

// The parts of file (a Uint8Array) with at most maxTensors tensors each: [{name, bytes}] for prefix (the
// input's padding between tensors is copied: zeros in a file gguf-split or llama.cpp wrote).
export function ggufSplit(file, maxTensors, prefix = 'model') {
  return ggufSplitLayout(file, file.length, maxTensors, prefix).map((p) => {
    const bytes = new Uint8Array(p.size);
    bytes.set(p.head);
    bytes.set(file.subarray(p.from, p.from + p.size - p.dataStart), p.dataStart);
    return { name: p.name, bytes };
  });
}
