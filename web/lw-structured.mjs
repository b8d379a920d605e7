// Structured output, tool calls and embeddings of the browser package, where the engine runs (the page's
// thread, or the worker: web/llamaweb-worker.mjs's 'structured' and 'embed' ops call the same functions).
// web/lw-openai.mjs turns requests into plans for structuredRun and embedRun and shapes their results.
//
// A constrained generation attaches a Grammar (web/lw-wasm-structured.c) to the engine for the request:
// every decode() that would pick a token (greedy or drawn) then picks it with the CPU sampler from the logits
// among the tokens the grammar allows, and advances the grammar (web/lw-model.mjs GpuModel/CpuEngine.decode).
// On the CPU engine the logits are in the heap after the decode anyway. On WebGPU the grammar's mask for the
// step (ceil(n_vocab / 32) words, computed here in C) is uploaded before the step into a buffer made at load
// and the GPU's argmax or draw runs over the allowed ids only (topk.wgsl MASK=1), so a constrained step still
// reads back the 4-byte id (Grammar.mask / take; result.grammar.gpuSteps counts them). The logits are read
// back (n_vocab floats) and the CPU sampler picks only where that does not apply: GpuModel.gpuMask = false,
// a wasm build without lw_wasm_model_set_mask, or a step whose GPU id the grammar does not allow (no allowed
// id with a non-NaN logit). Greedy ids are the same either way (tests/web/structured.test.mjs); sampled ones
// are drawn by the GPU's generator on the mask path, by the grammar's CPU sampler on the read-back path.
// Draws follow the engine's sampling parameters and seed (the same seed, the same text on either engine
// for the same logits, and the native `llamaweb run --grammar/--json-schema` text on the CPU engine).
//
// Embeddings: the CPU engine runs an embeddings context of its own over the model (the final norm's output,
// pooled and normalised in C as `llamaweb embed` does); WebGPU reads the final norm's row of each position
// (the GPU plan computes output rows only for a step's last token: one probe step per position and a decode
// that stores it in the KV cache, so the cache's contents are gone afterwards).
import { LlamawebError, statusError } from './lw-model.mjs';

const bad = (msg) => new LlamawebError('BAD_INPUT', msg);
// A grammar, schema, tools array or template that C refused: BAD_INPUT (NOT_ENOUGH_MEMORY when memory ran
// out) with C's status; a limit it hit (LW_ERR_TOO_LARGE: nesting, size) is bad input too, not CONTEXT_FULL.
function refused(M, st, msg) {
  const e = statusError(M, st, msg, 'decode');
  if (e.code !== 'NOT_ENOUGH_MEMORY') e.code = 'BAD_INPUT';
  return e;
}
const utf8 = new TextEncoder(), fromUtf8 = new TextDecoder();

// lw_tool_format values by name ('auto': the chat template's convention, else Hermes for grammars and every
// convention when parsing).
export const TOOL_FORMATS = Object.freeze({ auto: 0, hermes: 1, llama3: 2, mistral: 3 });
const FORMAT_NAMES = ['auto', 'hermes', 'llama3', 'mistral'];
// lw_pooling values by name
export const POOLINGS = Object.freeze({ none: 0, mean: 1, cls: 2, last: 3 });
const KINDS = { gbnf: 0, json_schema: 1, json: 1, tools: 2 };

// text as a NUL-terminated UTF-8 string in module M's heap: [address, bytes]; free with M._free
function put(M, text) {
  const b = utf8.encode(text);
  const p = M._malloc(b.length + 1);
  M.HEAPU8.set(b, p);
  M.HEAPU8[p + b.length] = 0;
  return [p, b.length];
}
// bytes [p, p + n) of the heap as text (a copy: a threaded build's heap is shared memory)
const text = (M, p, n) => (n > 0 ? fromUtf8.decode(M.HEAPU8.slice(p, p + n)) : '');

// The lw_model of an engine (its vocabulary, chat template).
export function lwModelOf(engine) {
  return typeof engine.lwModel === 'function' ? engine.lwModel() : engine.M._lw_wasm_model_model(engine.h);
}

// ---------------------------------------------------------------------------------------------------------
// Grammars
// ---------------------------------------------------------------------------------------------------------

// A grammar over an engine's vocabulary with the CPU sampler that picks its tokens. spec: {kind: 'gbnf' |
// 'json_schema' | 'json' | 'tools', text (GBNF, the schema's or the tools' JSON; none for 'json'), root
// (gbnf: its start rule), only (tools: the one function allowed), parallel (tools: several calls), format
// (tools: a TOOL_FORMATS name)}.
export class Grammar {
  static create(engine, spec) {
    const M = engine.M;
    if (typeof M._lw_wasm_grammar_new !== 'function') throw new LlamawebError('UNSUPPORTED_MODEL', 'this wasm build has no grammars (web/lw-wasm-structured.c)');
    const kind = KINDS[spec.kind];
    if (kind === undefined) throw bad(`unknown grammar kind ${JSON.stringify(spec.kind)}`);
    const [tp, tn] = put(M, spec.kind === 'json' ? '' : String(spec.text ?? ''));
    const root = spec.kind === 'gbnf' ? spec.root : spec.only;
    const [rp] = root ? put(M, String(root)) : [0];
    let g = 0;
    try {
      g = M._lw_wasm_grammar_new(lwModelOf(engine), kind, tp, tn, rp, spec.parallel === false ? 0 : 1,
        TOOL_FORMATS[spec.format || 'auto'] ?? 0);
    } finally {
      M._free(tp);
      if (rp) M._free(rp);
    }
    if (!g) throw new LlamawebError('NOT_ENOUGH_MEMORY', 'out of memory');
    const err = M.UTF8ToString(M._lw_wasm_grammar_error(g));
    if (err) {
      const st = M._lw_wasm_grammar_status(g);
      M._lw_wasm_grammar_free(g);
      throw refused(M, st, err);
    }
    return new Grammar(M, g);
  }

  constructor(M, g) {
    this.M = M;
    this.g = g;
    this.key = 'greedy'; // the sampler's settings (JSON of the engine's), or 'greedy'
    this.steps = 0;      // tokens picked
    this.gpuSteps = 0;   // of them, picked on the GPU among the allowed ids (GpuModel.decode: the mask path)
    this.ms = 0;         // time spent picking them (mask + sampler, or mask + accept), ms
    this.maskMs = 0;     // the mask's share on the GPU path (computed here, uploaded by the engine)
  }

  // The allowed tokens of this step as (n_vocab + 31) / 32 words at a heap address (for the GPU engine to
  // upload before the step; valid until the next accepted token).
  mask() {
    const t0 = performance.now();
    const p = this.M._lw_wasm_grammar_mask(this.g);
    if (!p) throw statusError(this.M, this.M._lw_wasm_grammar_status(this.g), this.M.UTF8ToString(this.M._lw_wasm_grammar_error(this.g)), 'decode');
    const dt = performance.now() - t0;
    this.ms += dt;
    this.maskMs += dt;
    return p;
  }

  // The id the GPU picked under mask(): advances the grammar by it and returns it, or -1 when the mask does
  // not allow it (no allowed id had a non-NaN logit: the GPU's padding id), and the caller picks from the
  // logits instead (pick()).
  take(id) {
    const t0 = performance.now();
    if (id < 0 || this.M._lw_wasm_grammar_allows(this.g, id) !== 1) return -1; // (the mask mask() made)
    const st = this.M._lw_wasm_grammar_accept(this.g, id);
    if (st !== 0) throw statusError(this.M, st, this.M.UTF8ToString(this.M._lw_wasm_grammar_error(this.g)), 'decode');
    this.steps++;
    this.gpuSteps++;
    this.ms += performance.now() - t0;
    return id;
  }

  // The engine's sampling parameters changed (and its generator was reseeded): the same for the draws.
  follow(p) {
    const st = this.M._lw_wasm_grammar_set_sampling(this.g, p.temp, p.topK, p.topP, p.minP, Number(p.seed));
    if (st !== 0) throw statusError(this.M, st, this.M.UTF8ToString(this.M._lw_wasm_grammar_error(this.g)), 'decode');
    this.key = JSON.stringify(p);
  }

  // The token after a decode of engine whose logits are at heap address ptr: out 'argmax' (greedy) or
  // 'sample' (the engine's sampling parameters, engine.sampling); the grammar advances by it.
  pick(engine, out, ptr) {
    const t0 = performance.now();
    if (out === 'argmax' && this.key !== 'greedy') {
      this.follow({ temp: 0, topK: 0, topP: 1, minP: 0, seed: 0 });
      this.key = 'greedy';
    } else if (out === 'sample' && this.key !== engine.sampling) {
      this.follow(JSON.parse(engine.sampling));
    }
    const id = this.M._lw_wasm_grammar_pick(this.g, ptr);
    if (id < 0) throw statusError(this.M, this.M._lw_wasm_grammar_status(this.g), this.M.UTF8ToString(this.M._lw_wasm_grammar_error(this.g)), 'decode');
    this.steps++;
    this.ms += performance.now() - t0;
    return id;
  }

  // Whether the output so far is a whole sentence of the grammar.
  complete() {
    return this.M._lw_wasm_grammar_complete(this.g) !== 0;
  }

  free() {
    if (this.g) this.M._lw_wasm_grammar_free(this.g);
    this.g = 0;
  }
}

// The GBNF text a JSON Schema (null: JSON mode) or OpenAI tools become (what a constrained request uses).
export function grammarText(M, spec) {
  const kind = KINDS[spec.kind];
  if (kind !== 1 && kind !== 2) throw bad('grammarText takes a json_schema, json or tools spec');
  const [tp, tn] = put(M, spec.kind === 'json' ? '' : String(spec.text ?? ''));
  const [op] = spec.only ? put(M, String(spec.only)) : [0];
  const err = M._malloc(256);
  try {
    const p = M._lw_wasm_grammar_gbnf(kind, tp, tn, op, spec.parallel === false ? 0 : 1, TOOL_FORMATS[spec.format || 'auto'] ?? 0, err);
    if (!p) throw bad(M.UTF8ToString(err));
    const s = M.UTF8ToString(p);
    M._lw_wasm_structured_free(p);
    return s;
  } finally {
    M._free(tp);
    if (op) M._free(op);
    M._free(err);
  }
}

// Runs fn() with a grammar for spec (null: none) choosing model's tokens. One at a time per model.
export async function withConstraint(model, spec, fn) {
  if (!spec) return fn();
  const engine = model.engine;
  if (model.freed) throw bad('model was freed');
  if (model.busy || engine.grammar) throw bad('a generation is already running on this model');
  const gr = Grammar.create(engine, spec);
  engine.grammar = gr;
  try {
    const r = await fn();
    r.grammar = { steps: gr.steps, gpuSteps: gr.gpuSteps, ms: gr.ms, complete: gr.complete() };
    return r;
  } finally {
    engine.grammar = null;
    gr.free();
  }
}

// ---------------------------------------------------------------------------------------------------------
// Tool calls
// ---------------------------------------------------------------------------------------------------------

// The tool-call convention model's chat template teaches ('auto' when none is recognised).
export function toolFormatOf(model) {
  const M = model.engine.M;
  return typeof M._lw_wasm_tool_format === 'function' ? FORMAT_NAMES[M._lw_wasm_tool_format(lwModelOf(model.engine))] || 'auto' : 'auto';
}

// The calls in a reply (format: a TOOL_FORMATS name): {calls: OpenAI tool_calls, content: the rest of the
// text, trimmed}. A malformed call stays content.
export function parseToolCalls(M, reply, format = 'auto') {
  const [tp, tn] = put(M, reply);
  const out = M._malloc(20);
  try {
    const t = M._lw_wasm_tool_calls_parse(tp, tn, TOOL_FORMATS[format] ?? 0, out);
    if (!t) throw new LlamawebError('NOT_ENOUGH_MEMORY', 'out of memory');
    try {
      const o = out >> 2, st = M.HEAP32[o + 4];
      if (st !== 0) throw refused(M, st, M.UTF8ToString(M._lw_wasm_tool_calls_error(t)));
      const calls = JSON.parse(text(M, M.HEAP32[o], M.HEAP32[o + 1]));
      return { calls, content: text(M, M.HEAP32[o + 2], M.HEAP32[o + 3]) };
    } finally {
      M._lw_wasm_tool_calls_free(t);
    }
  } finally {
    M._free(tp);
    M._free(out);
  }
}

// The prompt of a conversation with tools by model's chat template: messages as OpenAI sends them
// (tool_calls' arguments as JSON text or objects; templates get objects, as transformers' do), tools
// OpenAI's array (null: none).
export function renderWithTools(model, messages, tools) {
  if (!model.chatTemplate) throw bad(`tools need the model's chat template (${model.chatError})`);
  const M = model.engine.M;
  if (typeof M._lw_wasm_chat_render_json !== 'function') throw new LlamawebError('UNSUPPORTED_MODEL', 'this wasm build cannot render tools (web/lw-wasm-chat.c)');
  const [mp, mn] = put(M, JSON.stringify(messages.map(templateMessage)));
  const [tp] = tools && tools.length ? put(M, JSON.stringify(tools)) : [0];
  const len = M._malloc(4);
  try {
    const p = M._lw_wasm_chat_render_json(model.chat_, mp, mn, tp, 1, len);
    if (!p) throw bad(M.UTF8ToString(M._lw_wasm_chat_error(model.chat_)));
    const s = text(M, p, M.HEAP32[len >> 2]);
    M._lw_wasm_chat_string_free(model.chat_, p);
    return s;
  } finally {
    M._free(mp);
    if (tp) M._free(tp);
    M._free(len);
  }
}

// A message as chat templates read it: arguments of tool calls as objects where they are JSON objects
// (Qwen's, Hermes', Llama 3's and Mistral's templates write `arguments | tojson`).
function templateMessage(m) {
  if (!Array.isArray(m.tool_calls)) return m;
  const calls = m.tool_calls.map((c) => {
    const f = c && c.function;
    if (!f || typeof f.arguments !== 'string') return c;
    try {
      const a = JSON.parse(f.arguments);
      return a && typeof a === 'object' && !Array.isArray(a) ? { ...c, function: { ...f, arguments: a } } : c;
    } catch {
      return c;
    }
  });
  return { ...m, tool_calls: calls };
}

// ---------------------------------------------------------------------------------------------------------
// Running a plan (where the engine is)
// ---------------------------------------------------------------------------------------------------------

// Runs a generation plan on model (Model, web/llamaweb.mjs) and resolves to generate()'s / Chat.send's
// result, with toolCalls ({calls, content}) when plan.tools and plan.toolChoice is not 'none', grammar
// ({steps, ms, complete}) when constrained, and toolFormat. plan: mode ('session': a chat session given
// system, before ([{role, content}]) and last (the user's text); 'render': messages rendered with tools by
// the template; 'text': prompt, a raw completion), constraint (a Grammar spec or null), tools, toolChoice
// ('auto' | 'required' | 'none' | a function name), parallel, toolFormat, maxTokens, sampling, stop.
export async function structuredRun(model, plan, onToken, signal) {
  const format = plan.toolFormat && plan.toolFormat !== 'auto' ? plan.toolFormat : toolFormatOf(model);
  const calling = !!(plan.tools && plan.tools.length && plan.toolChoice !== 'none');
  let spec = plan.constraint || null;
  if (calling && plan.toolChoice !== 'auto') {
    spec = { kind: 'tools', text: JSON.stringify(plan.tools), only: plan.toolChoice === 'required' ? null : plan.toolChoice,
      parallel: plan.parallel !== false, format };
  }
  const opts = { maxTokens: plan.maxTokens, sampling: plan.sampling, stop: plan.stop, signal, reusePrefix: true,
    onToken: (t, id) => onToken && onToken(t, id) };
  const r = await withConstraint(model, spec, async () => {
    if (plan.mode === 'text') return model.generate(plan.prompt, opts);
    if (plan.mode === 'render') {
      const prompt = renderWithTools(model, plan.messages, plan.toolChoice === 'none' ? null : plan.tools);
      return model.generate(model.tokenizeSpecial(prompt), opts);
    }
    const chat = model.newChat(plan.system !== null && plan.system !== undefined ? { system: plan.system } : {});
    try {
      for (const m of plan.before || []) chat.add(m.role, m.content);
      return await chat.send(plan.last, opts);
    } finally {
      chat.free();
    }
  });
  r.toolFormat = format;
  if (calling) r.toolCalls = parseToolCalls(model.engine.M, r.text, format);
  return r;
}

// ---------------------------------------------------------------------------------------------------------
// Embeddings
// ---------------------------------------------------------------------------------------------------------

// The result_norm node of a GPU model's graph (its output: the final norm's, one row per step).
function normNode(engine) {
  if (engine.normNode_ !== undefined) return engine.normNode_;
  const M = engine.M, name = M._malloc(64), layer = M._malloc(4), ne0 = M._malloc(8);
  try {
    const n = M._lw_wasm_model_node(engine.h, 0, name, 64, layer, ne0);
    engine.normNode_ = -1;
    for (let i = n - 1; i >= 0; i--) {
      M._lw_wasm_model_node(engine.h, i, name, 64, layer, ne0);
      if (M.UTF8ToString(name) === 'result_norm') { engine.normNode_ = i; break; }
    }
    return engine.normNode_;
  } finally {
    M._free(name);
    M._free(layer);
    M._free(ne0);
  }
}

// The final norm's output of each position of ids (n_embd floats each, rows for positions `which`) on
// a GPU model, from cell 0: a probe step per wanted position (a one-token step at that cell), then a decode
// that stores the token in the KV cache for the next.
async function gpuRows(engine, ids, which, nEmbd) {
  const M = engine.M, node = normNode(engine);
  if (node < 0) throw new LlamawebError('UNSUPPORTED_MODEL', 'this model\'s GPU graph has no result_norm node');
  const dst = M._malloc(4 * nEmbd), tok = M._malloc(4);
  const rows = [];
  try {
    engine.nPast = 0;
    let at = 0;
    for (const i of which) {
      if (i > at) await engine.decode(ids.slice(at, i), 'none');
      M.HEAP32[tok >> 2] = ids[i];
      const st = M._lw_wasm_model_probe(engine.h, tok, 1, node, dst, nEmbd);
      if (st !== 0) throw statusError(M, st, 'embeddings: the GPU probe of result_norm failed', 'decode');
      await M.lwGpu.settle();
      engine.check();
      rows.push(M.HEAPF32.slice(dst >> 2, (dst >> 2) + nEmbd));
      at = i;
    }
    return rows;
  } finally {
    M._free(dst);
    M._free(tok);
  }
}

// Embeds inputs (texts, tokenized with BOS and control-token texts parsed as `llamaweb embed` does, or
// arrays of token ids) on model (Model): resolves to {vectors: [Float32Array] (one per input; pooling
// 'none': n_tokens * n_embd floats), tokens: [count], nEmbd, pooling, normalize}. opts: pooling ('mean' |
// 'cls' | 'last' | 'none'; default the file's pooling_type, else mean), normalize (llama.cpp's
// embd_normalize: 2 L2 (default), -1 none, 0 int16 range, 1 taxicab, p > 2 the p-norm).
export async function embedRun(model, inputs, opts = {}) {
  const engine = model.engine, M = engine.M, lwm = lwModelOf(engine);
  if (typeof M._lw_wasm_embed_new !== 'function') throw new LlamawebError('UNSUPPORTED_MODEL', 'this wasm build has no embeddings (web/lw-wasm-structured.c)');
  const nEmbd = model.info.n_embd, nVocab = model.info.n_vocab;
  let pooling = opts.pooling;
  if (pooling === undefined || pooling === null) {
    const p = M._lw_wasm_model_pooling(lwm);
    pooling = p >= 0 && p <= 3 ? Object.keys(POOLINGS)[p] : 'mean';
  }
  if (!(pooling in POOLINGS)) throw bad(`pooling must be one of ${Object.keys(POOLINGS).join(', ')} (got ${JSON.stringify(pooling)})`);
  const normalize = opts.normalize ?? 2;
  if (!Number.isInteger(normalize) || normalize < -1) throw bad(`normalize must be an integer >= -1 (got ${JSON.stringify(normalize)})`);
  const ids = inputs.map((x, i) => {
    const t = typeof x === 'string' ? model.tokenizeSpecial(x, true) : x;
    if (!t.length) throw bad(`input[${i}] has no tokens`);
    if (!t.every((id) => Number.isInteger(id) && id >= 0 && id < nVocab)) throw bad(`input[${i}]: token ids must be integers in [0, ${nVocab})`);
    return t;
  });
  const longest = Math.max(...ids.map((t) => t.length));
  if (longest > model.info.n_ctx) throw new LlamawebError('CONTEXT_FULL', `an input of ${longest} tokens does not fit the context (${model.info.n_ctx} cells)`);
  model.begin(opts.signal);
  try {
    const vectors = model.device === 'cpu' ? await cpuEmbed(model, lwm, ids, pooling, normalize, nEmbd)
      : await gpuEmbed(model, ids, pooling, normalize, nEmbd);
    return { vectors, tokens: ids.map((t) => t.length), nEmbd, pooling, normalize };
  } finally {
    model.busy = false;
    if (model.freed) model.release_();
  }
}

async function cpuEmbed(model, lwm, ids, pooling, normalize, nEmbd) {
  const M = model.engine.M, longest = Math.max(...ids.map((t) => t.length));
  const w = M._lw_wasm_embed_new(lwm, longest, model.info.threads || 1);
  if (!w) throw new LlamawebError('NOT_ENOUGH_MEMORY', 'out of memory');
  const cap = (pooling === 'none' ? longest : 1) * nEmbd;
  const out = M._malloc(4 * cap), ip = M._malloc(4 * longest);
  try {
    const err = M.UTF8ToString(M._lw_wasm_embed_error(w));
    if (err) throw statusError(M, M._lw_wasm_embed_status(w), err, 'decode');
    const vectors = [];
    for (const t of ids) {
      M.HEAP32.set(t, ip >> 2);
      const n = M._lw_wasm_embed_run(w, ip, t.length, POOLINGS[pooling], normalize, out, cap);
      if (n < 0) throw statusError(M, M._lw_wasm_embed_status(w), M.UTF8ToString(M._lw_wasm_embed_error(w)), 'decode');
      vectors.push(M.HEAPF32.slice(out >> 2, (out >> 2) + n));
      if (model.stopping) throw new LlamawebError('ABORTED', 'the embeddings request was stopped');
    }
    return vectors;
  } finally {
    M._free(out);
    M._free(ip);
    M._lw_wasm_embed_free(w);
  }
}

async function gpuEmbed(model, ids, pooling, normalize, nEmbd) {
  const engine = model.engine, M = engine.M;
  model.cacheOwner = null; // the KV cache is overwritten
  model.cached = null;
  model.pending = -1;
  const buf = M._malloc(4 * nEmbd);
  const norm = (v) => {
    if (normalize < 0) return v;
    M.HEAPF32.set(v, buf >> 2);
    M._lw_wasm_embed_normalize(buf, buf, nEmbd, normalize);
    return M.HEAPF32.slice(buf >> 2, (buf >> 2) + nEmbd);
  };
  try {
    const vectors = [];
    for (const t of ids) {
      const which = pooling === 'cls' ? [0] : pooling === 'last' ? [t.length - 1] : t.map((_, i) => i);
      const rows = await gpuRows(engine, t, which, nEmbd);
      if (pooling === 'none') {
        const all = new Float32Array(rows.length * nEmbd);
        rows.forEach((r, i) => all.set(norm(r), i * nEmbd));
        vectors.push(all);
      } else if (pooling === 'mean') {
        const sum = new Float64Array(nEmbd);
        for (const r of rows) for (let k = 0; k < nEmbd; k++) sum[k] += r[k];
        vectors.push(norm(Float32Array.from(sum, (x) => x / rows.length)));
      } else {
        vectors.push(norm(rows[0]));
      }
      if (model.stopping) throw new LlamawebError('ABORTED', 'the embeddings request was stopped');
    }
    engine.nPast = 0;
    return vectors;
  } finally {
    M._free(buf);
  }
}
