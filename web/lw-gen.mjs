// The generation state machine from JavaScript (src/model/gen.c through web/lw-wasm-gen.c): the rules of a
// generation (stop strings, max tokens, end of generation, a full context) live in C once, for every engine;
// the loops in web/llamaweb.mjs (Model.generate) and web/cli.mjs only decode what each step asks, await it,
// sample, and push the token back:
//
//     const gen = new Generation(M, lwModel, { nPredict: 64, nCtx: 2048, stop: ['\n\n'] });
//     let step = gen.start(ids, engine.nPast);                 // decode the prompt, then sample
//     let next = await engine.decode(ids, out);
//     while (step.sample) {
//       step = gen.push(next);                                 // step.text: hand it on
//       if (step.sample) next = await engine.decode([next], out);
//     }
//     out.append(step.tail); gen.free();                       // step.stop: why it ended
//
// Chat replies run the same machine inside the chat session (web/lw-wasm-session.c).
import { LlamawebError, statusError } from './lw-model.mjs';

const utf8 = new TextEncoder(), fromUtf8 = new TextDecoder();

// Stop strings as a list of non-empty strings (a string or strings; anything else is BAD_INPUT).
export function stopList(stops) {
  const list = stops === undefined || stops === null ? [] : typeof stops === 'string' ? [stops] : stops;
  if (!Array.isArray(list) || !list.every((x) => typeof x === 'string')) throw new LlamawebError('BAD_INPUT', 'stop must be a string or an array of strings');
  return list.filter((x) => x.length > 0);
}

// Stop strings into the heap as C takes them: their UTF-8 bytes one after the other and each one's length.
// Returns [bytes, lengths, count] (addresses to free with M._free).
export function putStops(M, stops) {
  const enc = stops.map((x) => utf8.encode(x)), total = enc.reduce((a, b) => a + b.length, 0);
  const bytes = M._malloc(total + 1), lens = M._malloc(4 * enc.length + 4);
  let at = bytes;
  enc.forEach((b, i) => { M.HEAPU8.set(b, at); at += b.length; M.HEAP32[(lens >> 2) + i] = b.length; });
  return [bytes, lens, enc.length];
}

// lw_stop_reason values and the reasons the package reports for them
export const STOP_NONE = 0, STOP_EOG = 1, STOP_CALLBACK = 3, STOP_STRING = 5;
export const REASONS = ['none', 'eog', 'length', 'stopped', 'context', 'stopString'];

// Result slots of web/lw-wasm-gen.c (LW_WG_*): one int32 each in the machine's result area.
const WG = { status: 0, nIds: 1, pos: 2, sample: 3, stop: 4, token: 5, nGen: 6, text: 7, textLen: 8, tail: 9, tailLen: 10 };

// One generation's rules, in C (the generation state machine, src/model/gen.c via web/lw-wasm-gen.c): stop
// strings, maxTokens, end of generation and a full context. JS decodes what each step asks and pushes the
// sampled token; each step gives {nIds, pos, sample, stop, text, tail}. free() when done.
export class Generation {
  constructor(M, lwModel, { nPredict, nCtx, stop, special = false, decodeLast = false }) {
    if (typeof M._lw_wasm_gen_new !== 'function') throw new LlamawebError('UNSUPPORTED_MODEL', 'this build has no generation machine (web/lw-wasm-gen.c)');
    this.M = M;
    const [bytes, lens, n] = putStops(M, stop);
    try {
      this.w = M._lw_wasm_gen_new(lwModel, nPredict, nCtx, special ? 1 : 0, decodeLast ? 1 : 0, bytes, lens, n);
    } finally {
      M._free(bytes);
      M._free(lens);
    }
    if (!this.w) throw new LlamawebError('NOT_ENOUGH_MEMORY', 'out of memory');
    this.out = M._lw_wasm_gen_out(this.w) >> 2;
    if (this.slot(WG.status) !== 0) {
      const e = this.failure();
      this.free();
      throw e;
    }
    this.ids = 0; // heap copy of the prompt while start() runs
  }
  slot(i) {
    return this.M.HEAP32[this.out + i];
  }
  failure() {
    return statusError(this.M, this.slot(WG.status), this.M.UTF8ToString(this.M._lw_wasm_gen_error(this.w)) || 'generation failed', 'decode');
  }
  step(st) {
    if (st !== 0) throw this.failure();
    const M = this.M, text = (p, n) => (n > 0 ? fromUtf8.decode(M.HEAPU8.slice(p, p + n)) : '');
    return { nIds: this.slot(WG.nIds), pos: this.slot(WG.pos), sample: this.slot(WG.sample) !== 0, stop: this.slot(WG.stop),
      token: this.slot(WG.token), text: text(this.slot(WG.text), this.slot(WG.textLen)),
      tail: text(this.slot(WG.tail), this.slot(WG.tailLen)) };
  }
  // The prompt ids going to cells from pos: the first step (decode them, then sample unless maxTokens is 0).
  start(ids, pos) {
    const M = this.M, p = M._malloc(4 * ids.length + 4);
    try {
      M.HEAP32.set(ids, p >> 2);
      return this.step(M._lw_wasm_gen_start(this.w, p, ids.length, pos));
    } finally {
      M._free(p);
    }
  }
  push(id) {
    return this.step(this.M._lw_wasm_gen_push(this.w, id));
  }
  // The caller ends it (a stop() or an abort): the end step.
  stop() {
    return this.step(this.M._lw_wasm_gen_stop(this.w, STOP_CALLBACK));
  }
  free() {
    if (this.w) this.M._lw_wasm_gen_free(this.w);
    this.w = 0;
  }
}
