// The OpenAI-shaped API of a model (web/llamaweb.mjs: Model on the calling thread and WorkerModel in a
// worker alike), in the shape of OpenAI's Chat Completions and Completions so code written for them (or for
// WebLLM) runs on llamaweb:
//
//     const r = await model.chat.completions.create({ messages: [{ role: 'user', content: 'Hi' }], max_tokens: 64 });
//     r.choices[0].message.content; r.choices[0].finish_reason; r.usage.total_tokens;
//     for await (const chunk of await model.chat.completions.create({ messages, stream: true })) {
//       out.append(chunk.choices[0]?.delta?.content ?? '');   // the last chunk: finish_reason and usage
//     }
//     const c = await model.completions.create({ prompt: 'Once upon a time', max_tokens: 16, temperature: 0 });
//
// Parameters: messages (chat) / prompt (text, [text] or token ids), stream, max_tokens (max_completion_tokens;
// default: until the end of generation or a full context), temperature (default 1; 0 is greedy), top_p
// (default 1), top_k (0: off; the GPU caps it at 256), min_p (default 0), seed (default: random), stop (a
// string or strings; the reply ends before the first, which is not part of it), signal (an AbortSignal:
// rejects, or ends the stream, with LlamawebError code ABORTED; one already aborted decodes nothing). Other
// fields (model, n: 1, user, ...) are accepted and ignored; anything else refused is a BAD_INPUT error.
//
// A chat completion is a chat session (Model.newChat: the model's template, or the plain "User:/Assistant:"
// format without one) given the messages and answering the last, which must be the user's. Requests are
// stateless, yet the KV cache's cells that a request's prompt begins with (the longest common prefix of the
// ids, as llama.cpp's server does) are kept rather than decoded again: a chat UI sending the conversation
// again with one more message decodes only the new part (usage.prompt_tokens_details.cached_tokens), and the
// reply is a fresh context's. Completions reuse the cache the same way.
import { LlamawebError } from './lw-model.mjs';
import { structuredRun, embedRun } from './lw-structured.mjs';

// ---------------------------------------------------------------------------------------------------------
// Requests
// ---------------------------------------------------------------------------------------------------------

const bad = (msg) => new LlamawebError('BAD_INPUT', msg);

function num(req, key, lo, hi, dflt) {
  const v = req[key];
  if (v === undefined || v === null) return dflt;
  if (typeof v !== 'number' || !(v >= lo && v <= hi)) throw bad(`${key} must be a number in [${lo}, ${hi}] (got ${JSON.stringify(v)})`);
  return v;
}

function int(req, key, lo, dflt) {
  const v = num(req, key, lo, Number.MAX_SAFE_INTEGER, dflt);
  if (v !== dflt && !Number.isInteger(v)) throw bad(`${key} must be an integer (got ${v})`);
  return v;
}

// A message's content as text: a string, null, or OpenAI's content parts of type 'text'.
function contentText(m, i) {
  const c = m.content;
  if (c === null || c === undefined) return '';
  if (typeof c === 'string') return c;
  if (Array.isArray(c)) {
    return c.map((p) => {
      if (!p || p.type !== 'text' || typeof p.text !== 'string') throw bad(`messages[${i}].content: only text parts are supported`);
      return p.text;
    }).join('');
  }
  throw bad(`messages[${i}].content must be a string or an array of text parts`);
}

// The options every request shares, as Model.generate / Chat.send take them.
function commonOptions(req) {
  if (!req || typeof req !== 'object') throw bad('create() takes a request object');
  if (req.n !== undefined && req.n !== null && req.n !== 1) throw bad('n must be 1');
  const maxTokens = int(req, 'max_completion_tokens', 0, int(req, 'max_tokens', 0, Infinity));
  const temp = num(req, 'temperature', 0, 2, 1);
  const sampling = temp > 0 ? {
    temp, topP: num(req, 'top_p', 0, 1, 1), topK: int(req, 'top_k', 0, 0), minP: num(req, 'min_p', 0, 1, 0),
    seed: int(req, 'seed', 0, Math.floor(Math.random() * 2 ** 32)),
  } : undefined;
  let stop = req.stop ?? [];
  if (typeof stop === 'string') stop = [stop];
  if (!Array.isArray(stop) || !stop.every((s) => typeof s === 'string')) throw bad('stop must be a string or an array of strings');
  stop = stop.filter((s) => s.length > 0);
  const signal = req.signal ?? undefined;
  if (signal !== undefined && (typeof signal.aborted !== 'boolean' || typeof signal.addEventListener !== 'function')) {
    throw bad('signal must be an AbortSignal');
  }
  return { maxTokens, sampling, stop, signal, stream: !!req.stream };
}

const aborted = () => new LlamawebError('ABORTED', 'the request was aborted');
const finishReason = (reason) => (reason === 'length' || reason === 'context' ? 'length' : 'stop');
const newId = (prefix) => prefix + Array.from({ length: 12 }, () => Math.floor(Math.random() * 36).toString(36)).join('');

// ---------------------------------------------------------------------------------------------------------
// Running a request: one generation whose pieces either gather into the result or stream as chunks
// ---------------------------------------------------------------------------------------------------------

// Runs start(onToken, signal) -> Promise<result>. Not streaming: resolves to finish(result). Streaming: an
// async iterable of chunk(text) per non-empty piece, then finish's chunk(s); leaving the loop early ends the
// generation. The caller's signal aborts either way (ABORTED); its listener is removed when the run ends.
function run(model, opts, start, chunk, finish) {
  if (opts.signal && opts.signal.aborted) return Promise.reject(aborted());
  if (model.openaiRunning_) return Promise.reject(bad('a request is already running on this model'));
  model.openaiRunning_ = true;
  const inner = new AbortController(); // the caller's signal, or the stream's consumer leaving
  const forward = () => inner.abort();
  if (opts.signal) opts.signal.addEventListener('abort', forward, { once: true });
  const settle = async (p) => {
    try {
      const r = await p;
      if (opts.signal && opts.signal.aborted) throw aborted();
      return r;
    } catch (e) {
      throw opts.signal && opts.signal.aborted ? aborted() : LlamawebError.from(e);
    } finally {
      if (opts.signal) opts.signal.removeEventListener('abort', forward);
      model.openaiRunning_ = false;
    }
  };
  if (!opts.stream) return settle(start(() => {}, inner.signal)).then(finish);
  const chunks = pushed((push) => settle(start((text) => { if (text) push(chunk(text)); }, inner.signal)), () => inner.abort());
  return Promise.resolve((async function* () {
    yield* finish(yield* chunks, true);
  })());
}

// What run(push) pushes, as an async generator, while the promise run returned (it is called now) goes on;
// its failure is thrown after the items pushed before it, its value is the generator's return value. Leaving
// the loop early calls leave() and waits for the run to end. Model.stream is built on it too.
export function pushed(run, leave) {
  const queue = [];
  let wake = null, done = false, failure = null, value;
  const poke = () => { if (wake) { wake(); wake = null; } };
  const running = run((x) => { queue.push(x); poke(); })
    .then((v) => { value = v; }, (e) => { failure = e; })
    .finally(() => { done = true; poke(); });
  return (async function* () {
    try {
      for (;;) {
        while (queue.length) yield queue.shift();
        if (done) break;
        await new Promise((r) => { wake = r; });
      }
      if (failure) throw failure;
      return value;
    } finally {
      if (!done) leave(); // the consumer left early
      await running;
    }
  })();
}

// ---------------------------------------------------------------------------------------------------------
// Chat completions
// ---------------------------------------------------------------------------------------------------------

// The system prompt, the messages before the last, and the last (the user's) of a request.
function parseMessages(messages) {
  if (!Array.isArray(messages) || messages.length === 0) throw bad('messages must be a non-empty array');
  const all = messages.map((m, i) => {
    if (!m || typeof m.role !== 'string' || !m.role) throw bad(`messages[${i}] needs a role`);
    return { role: m.role, content: contentText(m, i) };
  });
  const system = all[0].role === 'system' || all[0].role === 'developer' ? all.shift().content : null;
  const last = all.pop();
  if (!last || last.role !== 'user') throw bad('the last message must be the user\'s');
  return { system, before: all, last: last.content };
}

async function chatCompletion(model, req) {
  if (structured(req)) return structuredChat(model, req);
  const opts = commonOptions(req);
  const { system, before, last } = parseMessages(req && req.messages);
  const id = newId('chatcmpl-'), created = Math.floor(Date.now() / 1000), name = req.model || model.name || 'llamaweb';
  const base = (choices) => ({ id, object: 'chat.completion.chunk', created, model: name, choices });
  const usage = (r) => ({
    prompt_tokens: r.fromCell + r.decodedTokens, completion_tokens: r.tokens.length,
    total_tokens: r.fromCell + r.decodedTokens + r.tokens.length, prompt_tokens_details: { cached_tokens: r.fromCell },
  });
  const start = async (onToken, signal) => {
    const chat = model.newChat(system !== null ? { system } : {});
    try {
      for (const m of before) await chat.add(m.role, m.content);
      return await chat.send(last, { maxTokens: opts.maxTokens, sampling: opts.sampling, stop: opts.stop, signal,
        reusePrefix: true, onToken: (text) => onToken(text) });
    } finally {
      chat.free();
    }
  };
  let sentRole = false;
  const chunk = (text) => {
    const delta = sentRole ? { content: text } : { role: 'assistant', content: text };
    sentRole = true;
    return base([{ index: 0, delta, logprobs: null, finish_reason: null }]);
  };
  return run(model, opts, start, chunk, (r, streaming) => {
    if (streaming) {
      return (function* () {
        if (!sentRole) yield chunk('');
        yield { ...base([{ index: 0, delta: {}, logprobs: null, finish_reason: finishReason(r.reason) }]), usage: usage(r) };
      })();
    }
    return {
      id, object: 'chat.completion', created, model: name,
      choices: [{ index: 0, message: { role: 'assistant', content: r.text }, logprobs: null, finish_reason: finishReason(r.reason) }],
      usage: usage(r),
    };
  });
}

// ---------------------------------------------------------------------------------------------------------
// Completions (a raw prompt, a fresh context)
// ---------------------------------------------------------------------------------------------------------

async function completion(model, req) {
  if (structured(req)) return structuredCompletion(model, req);
  const opts = commonOptions(req);
  let prompt = req.prompt;
  if (Array.isArray(prompt) && prompt.length === 1 && typeof prompt[0] === 'string') prompt = prompt[0];
  const ids = Array.isArray(prompt) && prompt.every((x) => Number.isInteger(x) && x >= 0);
  if (typeof prompt !== 'string' && !ids) throw bad('prompt must be a string, [string] or an array of token ids');
  const id = newId('cmpl-'), created = Math.floor(Date.now() / 1000), name = req.model || model.name || 'llamaweb';
  const base = (choices) => ({ id, object: 'text_completion', created, model: name, choices });
  const usage = (r) => ({ prompt_tokens: r.promptTokens, completion_tokens: r.tokens.length, total_tokens: r.promptTokens + r.tokens.length,
    prompt_tokens_details: { cached_tokens: r.fromCell } });
  const start = (onToken, signal) => model.generate(prompt, { maxTokens: opts.maxTokens, sampling: opts.sampling, stop: opts.stop,
    signal, reusePrefix: true, onToken: (text) => onToken(text) });
  const chunk = (text) => base([{ index: 0, text, logprobs: null, finish_reason: null }]);
  return run(model, opts, start, chunk, (r, streaming) => {
    const choice = (text) => ({ index: 0, text, logprobs: null, finish_reason: finishReason(r.reason) });
    if (streaming) return [{ ...base([choice('')]), usage: usage(r) }][Symbol.iterator]();
    return { ...base([choice(r.text)]), usage: usage(r) };
  });
}

// ---------------------------------------------------------------------------------------------------------
// Structured output and tool calls (web/lw-structured.mjs runs the plans where the engine is)
// ---------------------------------------------------------------------------------------------------------
//
// response_format: {type: 'text'} (as without), {type: 'json_object'} (any JSON value; WebLLM's `schema`
// beside it as json_schema), {type: 'json_schema', json_schema: {name, schema, strict}} (JSON valid for the
// schema: src/grammar's converter, llama.cpp's json-schema-to-grammar); grammar: a GBNF string (llama.cpp's
// dialect; an extension, as llama.cpp's server takes it). tools: OpenAI's [{type: 'function', function:
// {name, description, parameters}}], rendered into the model's chat template; tool_choice 'auto' (default:
// the reply is parsed for calls in the template's convention), 'required' or {type: 'function', function:
// {name}} (the reply is constrained to calls: a grammar from the tools' parameter schemas), 'none' (tools
// are not shown); parallel_tool_calls (default true); tool_format (an extension: 'hermes' | 'llama3' |
// 'mistral', default the template's). Replies with calls have message.tool_calls and finish_reason
// 'tool_calls'. Streamed as OpenAI streams them: the text before the first call as content deltas, then per
// call a delta {tool_calls: [{index, id, type: 'function', function: {name, arguments}}]} once its name
// is complete and deltas {tool_calls: [{index, function: {arguments}}]} with the arguments' text as it is
// generated; the argument pieces of a call join to the result's arguments (toolCallStream). Messages may
// carry tool_calls (assistant) and tool_call_id (role 'tool'), and the conversation may end with tool results.

const RESPONSE_TYPES = ['text', 'json_object', 'json_schema'];
const TOOL_FORMAT_NAMES = ['auto', 'hermes', 'llama3', 'mistral'];
// where a reply's tool calls begin, per convention (Llama 3's bare object: a '{' opening the reply)
const CALL_MARKERS = { hermes: ['<tool_call>'], mistral: ['[TOOL_CALLS]'], llama3: ['<|python_tag|>'],
  auto: ['<tool_call>', '[TOOL_CALLS]', '<|python_tag|>'] };

const isObject = (x) => x !== null && typeof x === 'object' && !Array.isArray(x);

// Whether a request asks for anything this section handles.
function structured(req) {
  if (!req || typeof req !== 'object') return false;
  const rf = req.response_format;
  const msgs = Array.isArray(req.messages) ? req.messages : [];
  return (rf !== undefined && rf !== null && !(isObject(rf) && rf.type === 'text')) ||
    (req.grammar !== undefined && req.grammar !== null) || (req.tools !== undefined && req.tools !== null) ||
    (req.tool_choice !== undefined && req.tool_choice !== null) ||
    msgs.some((m) => m && (m.role === 'tool' || Array.isArray(m.tool_calls)));
}

// The grammar spec of response_format / grammar (null: none), checked here; the schema itself is checked
// by C when the grammar is made (BAD_INPUT with its message).
function constraintOf(req) {
  const rf = req.response_format;
  let spec = null;
  if (rf !== undefined && rf !== null) {
    if (!isObject(rf) || !RESPONSE_TYPES.includes(rf.type)) throw bad(`response_format.type must be one of ${RESPONSE_TYPES.join(', ')}`);
    if (rf.type === 'json_object') {
      const sc = rf.schema; // WebLLM's form
      if (sc !== undefined && sc !== null && typeof sc !== 'string' && !isObject(sc)) throw bad('response_format.schema must be a JSON Schema (object or JSON text)');
      spec = sc === undefined || sc === null ? { kind: 'json' } : { kind: 'json_schema', text: typeof sc === 'string' ? sc : JSON.stringify(sc) };
    } else if (rf.type === 'json_schema') {
      const js = rf.json_schema;
      if (!isObject(js) || !(isObject(js.schema) || typeof js.schema === 'boolean')) throw bad('response_format.json_schema.schema must be a JSON Schema object');
      spec = { kind: 'json_schema', text: JSON.stringify(js.schema) };
    }
  }
  if (req.grammar !== undefined && req.grammar !== null) {
    if (typeof req.grammar !== 'string' || !req.grammar.trim()) throw bad('grammar must be a GBNF string');
    if (spec) throw bad('grammar and response_format cannot both constrain a reply');
    spec = { kind: 'gbnf', text: req.grammar };
  }
  return spec;
}

// The tools of a request (null: none), tool_choice ('auto' | 'required' | 'none' | a function's name),
// parallel_tool_calls and tool_format, checked.
function toolsOf(req) {
  if (req.tools === undefined || req.tools === null) {
    if (req.tool_choice !== undefined && req.tool_choice !== null && req.tool_choice !== 'none' && req.tool_choice !== 'auto') {
      throw bad('tool_choice needs tools');
    }
    return { tools: null, choice: 'none', parallel: true, format: 'auto' };
  }
  if (!Array.isArray(req.tools)) throw bad('tools must be an array');
  const names = new Set();
  req.tools.forEach((t, i) => {
    const f = t && t.function;
    if (!isObject(t) || t.type !== 'function' || !isObject(f)) throw bad(`tools[${i}] must be {type: 'function', function: {name, ...}}`);
    if (typeof f.name !== 'string' || !/^[a-zA-Z0-9_-]{1,64}$/.test(f.name)) throw bad(`tools[${i}].function.name must match [a-zA-Z0-9_-]{1,64}`);
    if (f.parameters !== undefined && !isObject(f.parameters)) throw bad(`tools[${i}].function.parameters must be a JSON Schema object`);
    if (f.description !== undefined && typeof f.description !== 'string') throw bad(`tools[${i}].function.description must be a string`);
    names.add(f.name);
  });
  let choice = req.tool_choice ?? 'auto';
  if (isObject(choice)) {
    const n = choice.type === 'function' && choice.function && choice.function.name;
    if (typeof n !== 'string' || !names.has(n)) throw bad('tool_choice names no function of tools');
    choice = n;
  } else if (!['auto', 'required', 'none'].includes(choice)) {
    throw bad("tool_choice must be 'auto', 'required', 'none' or {type: 'function', function: {name}}");
  }
  if (req.tools.length === 0 && choice !== 'none' && choice !== 'auto') throw bad('tool_choice needs tools');
  const parallel = req.parallel_tool_calls ?? true;
  if (typeof parallel !== 'boolean') throw bad('parallel_tool_calls must be a boolean');
  const format = req.tool_format ?? 'auto';
  if (!TOOL_FORMAT_NAMES.includes(format)) throw bad(`tool_format must be one of ${TOOL_FORMAT_NAMES.join(', ')}`);
  return { tools: req.tools.length ? req.tools : null, choice, parallel, format };
}

// Messages as the template reads them (text content, tool calls and ids kept).
function templateMessages(messages) {
  if (!Array.isArray(messages) || messages.length === 0) throw bad('messages must be a non-empty array');
  return messages.map((m, i) => {
    if (!m || typeof m.role !== 'string' || !m.role) throw bad(`messages[${i}] needs a role`);
    const out = { role: m.role, content: m.content === null || m.content === undefined ? null : contentText(m, i) };
    if (m.tool_calls !== undefined && m.tool_calls !== null) {
      if (!Array.isArray(m.tool_calls) || !m.tool_calls.every((c) => isObject(c) && isObject(c.function) && typeof c.function.name === 'string')) {
        throw bad(`messages[${i}].tool_calls must be [{id, type: 'function', function: {name, arguments}}]`);
      }
      out.tool_calls = m.tool_calls.map((c) => ({ id: c.id, type: c.type || 'function', function: { name: c.function.name, arguments: c.function.arguments ?? '{}' } }));
    }
    for (const k of ['tool_call_id', 'name', 'reasoning_content']) {
      if (m[k] !== undefined && m[k] !== null) {
        if (typeof m[k] !== 'string') throw bad(`messages[${i}].${k} must be a string`);
        out[k] = m[k];
      }
    }
    return out;
  });
}

// Runs plan where model's engine is: the page's (structuredRun) or the worker's ('structured' op; the
// signal stops it there).
function runPlan(model, plan) {
  return (onToken, signal) => {
    if (!model.rpc) return structuredRun(model, plan, onToken, signal);
    const stop = () => model.stop();
    if (signal) signal.addEventListener('abort', stop, { once: true });
    return model.rpc.call({ op: 'structured', handle: model.handle, plan },
      (ev) => { if (ev.token !== undefined) onToken(ev.token, ev.tokenId); })
      .finally(() => { if (signal) signal.removeEventListener('abort', stop); });
  };
}

// Holds back streamed text from the first place a tool call may begin (format's markers; Llama 3's calls
// are a reply opening with '{'): push(text) -> the text safe to stream now; held() -> what was held.
function callHold(format) {
  const markers = CALL_MARKERS[format] || CALL_MARKERS.auto;
  const bare = format === 'llama3' || format === 'auto';
  let held = '', cut = false, sent = '';
  return {
    push(t) {
      if (cut) { held += t; return ''; }
      const s = held + t;
      let at = -1;
      for (const m of markers) {
        const i = s.indexOf(m);
        if (i >= 0 && (at < 0 || i < at)) at = i;
      }
      if (bare && !sent.trim()) {
        const i = s.search(/\S/);
        if (i >= 0 && s[i] === '{' && (at < 0 || i < at)) at = i;
      }
      if (at < 0 && bare && !(sent + s).trim()) at = 0; // only whitespace so far: it may open a call
      if (at >= 0) {
        cut = true;
        held = s.slice(at);
        sent += s.slice(0, at);
        return s.slice(0, at);
      }
      let keep = 0; // the longest end of s that begins a marker
      for (const m of markers) {
        for (let k = Math.min(m.length - 1, s.length); k > keep; k--) if (s.endsWith(m.slice(0, k))) { keep = k; break; }
      }
      held = s.slice(s.length - keep);
      sent += s.slice(0, s.length - keep);
      return s.slice(0, s.length - keep);
    },
    held: () => held,
    cut: () => cut,
  };
}

// Follows the calls in the text callHold holds back (from the first marker on) as it grows, in format's
// convention ('auto': the one its first marker shows), mirroring src/grammar/tool-call.c's parser: a call
// object's "name" (or "function") string, then its "arguments" (or "parameters") object streamed as its raw
// text char by char (the parser's arguments are that text). It stops following (off) at anything else: a
// name after the arguments, arguments as a JSON string, text between calls; the calls from there on then
// come whole from the final parse (finish). feed(text) -> [{index, id?, name?, args}] events.
function callScanner(format) {
  const WS = /[ \t\n\r]/; // the C parser's whitespace
  let buf = '', pos = 0, off = false, fmt = format === 'auto' ? null : format;
  let state = 'start'; // start | open (before a call object) | key | colon | value | args | skip | after | between
  const calls = []; // {name, args, shown (the header went out)}
  let cur = null, key = null, depth = 0, inStr = false, esc = false;
  let events = [];
  const ev = (e) => { events.push(e); };
  const ws = () => { while (pos < buf.length && WS.test(buf[pos])) pos++; };
  // a literal at pos: 1 taken, 0 needs more text, -1 absent
  const lit = (l) => {
    const n = Math.min(l.length, buf.length - pos);
    if (buf.slice(pos, pos + n) !== l.slice(0, n)) return -1;
    if (n < l.length) return 0;
    pos += l.length;
    return 1;
  };
  // a complete JSON string token at pos: its value, undefined when it needs more text, null when not one
  const str = () => {
    if (buf[pos] !== '"') return null;
    for (let i = pos + 1, e = false; i < buf.length; i++) {
      if (e) { e = false; continue; }
      if (buf[i] === '\\') e = true;
      else if (buf[i] === '"') {
        try { const v = JSON.parse(buf.slice(pos, i + 1)); pos = i + 1; return v; } catch { return null; }
      }
    }
    return undefined;
  };
  const header = () => {
    if (cur.shown) return;
    cur.shown = true;
    ev({ index: calls.length - 1, id: newId('call_'), name: cur.name, args: '' });
  };
  // one step of the machine: true when it moved (call again), false when it waits for more text
  const step = () => {
    if (state === 'start') {
      ws();
      if (pos >= buf.length) return false;
      if (!fmt) { // auto: the first marker decides, as the C parser's order finds it for a reply opening so
        if (lit('<tool_call>') === 0 || lit('[TOOL_CALLS]') === 0 || lit('<|python_tag|>') === 0) return false;
        const c = buf[pos];
        fmt = buf.startsWith('<tool_call>', pos) ? 'hermes' : buf.startsWith('[TOOL_CALLS]', pos) || c === '[' ? 'mistral'
          : buf.startsWith('<|python_tag|>', pos) || c === '{' ? 'llama3' : null;
        if (!fmt) { off = true; return false; }
      }
      const marker = { hermes: '<tool_call>', mistral: '[TOOL_CALLS]', llama3: '<|python_tag|>' }[fmt];
      const m = lit(marker);
      if (m === 0) return false;
      if (m < 0 && fmt === 'hermes') { off = true; return false; }
      if (fmt === 'mistral') {
        ws();
        if (pos >= buf.length) return false;
        if (buf[pos] !== '[') { off = true; return false; }
        pos++;
      }
      state = 'open';
      return true;
    }
    if (state === 'open') {
      ws();
      if (pos >= buf.length) return false;
      if (buf[pos] !== '{') { off = true; return false; }
      pos++;
      cur = { name: null, args: '', shown: false };
      calls.push(cur);
      state = 'key';
      return true;
    }
    if (state === 'key') {
      ws();
      if (pos >= buf.length) return false;
      if (buf[pos] === '}') { pos++; state = 'after'; return true; }
      if (buf[pos] === ',') { pos++; return true; }
      const k = str();
      if (k === undefined) return false;
      if (k === null) { off = true; return false; }
      key = k;
      state = 'colon';
      return true;
    }
    if (state === 'colon') {
      ws();
      if (pos >= buf.length) return false;
      if (buf[pos] !== ':') { off = true; return false; }
      pos++;
      state = 'value';
      return true;
    }
    if (state === 'value') {
      ws();
      if (pos >= buf.length) return false;
      if ((key === 'name' || (key === 'function' && cur.name === null)) && buf[pos] === '"') {
        const v = str();
        if (v === undefined) return false;
        if (v === null || v === '') { off = true; return false; }
        cur.name = v;
        state = 'key';
        return true;
      }
      if (key === 'arguments' || key === 'parameters') {
        if (cur.name === null || buf[pos] !== '{' || cur.args) { off = true; return false; } // whole, from the parse
        header();
        state = 'args';
        depth = 0, inStr = false, esc = false;
        return true;
      }
      state = 'skip';
      depth = 0, inStr = false, esc = false;
      return true;
    }
    if (state === 'args' || state === 'skip') { // a value's raw text up to its end
      const from = pos;
      let done = false;
      while (pos < buf.length && !done) {
        const c = buf[pos];
        if (inStr) {
          if (esc) esc = false;
          else if (c === '\\') esc = true;
          else if (c === '"') inStr = false;
        } else if (c === '"') inStr = true;
        else if (c === '{' || c === '[') depth++;
        else if (c === '}' || c === ']') {
          if (depth === 0) break; // the end of a bare value in the enclosing object
          depth--;
          if (depth === 0 && state === 'args') done = true;
        } else if (c === ',' && depth === 0) break;
        pos++;
        if (depth === 0 && !inStr && state === 'skip' && (c === '"' || c === '}' || c === ']')) done = true;
      }
      if (state === 'args' && pos > from) {
        const t = buf.slice(from, pos);
        cur.args += t;
        ev({ index: calls.length - 1, args: t });
      }
      if (!done && state === 'skip' && pos < buf.length) done = true; // a number or literal ended by , or }
      if (!done) return false;
      state = 'key';
      return true;
    }
    if (state === 'after') { // a call object ended
      if (cur.name === null) { off = true; return false; }
      header(); // no arguments: the parse gives "{}"
      if (fmt === 'hermes') {
        ws();
        const m = lit('</tool_call>');
        if (m === 0 || pos >= buf.length) return false;
        if (m < 0) { off = true; return false; }
        state = 'between';
        return true;
      }
      ws();
      if (pos >= buf.length) return false;
      if (fmt === 'mistral') {
        if (buf[pos] === ',') { pos++; state = 'open'; return true; }
        off = true; // ']': the array is over
        return false;
      }
      if (buf[pos] === ';') pos++;
      state = 'open';
      return true;
    }
    if (state === 'between') { // hermes: another block, or the end
      ws();
      const m = lit('<tool_call>');
      if (m === 0 || pos >= buf.length) return false;
      if (m < 0) { off = true; return false; }
      state = 'open';
      return true;
    }
    return false;
  };
  return {
    feed(t) {
      events = [];
      if (off) return events;
      buf += t;
      while (!off && step());
      return events;
    },
    calls,
  };
}

// The streamed deltas of a reply with tools: push(text) -> deltas as they come ({content} before the first
// call, then {tool_calls: [...]}); finish(calls, content) -> the deltas that complete them from the final
// parse (openaiCalls' objects and its content, null for none): the rest of each streamed call's arguments,
// the calls not streamed whole, and content outside the calls that did not stream. A streamed call the parse
// does not have (a reply cut off inside it, or text that looked like a call and was not) stays as streamed:
// what went out cannot be taken back; every parsed call still comes, after it.
export function toolCallStream(format) {
  const hold = callHold(format), scan = callScanner(format);
  let fed = 0, sent = '';
  const calls = scan.calls;
  const ids = [];
  const asDelta = (e) => {
    if (e.id) {
      ids[e.index] = e.id;
      return { index: e.index, id: e.id, type: 'function', function: { name: e.name, arguments: e.args } };
    }
    return { index: e.index, function: { arguments: e.args } };
  };
  return {
    push(t) {
      const out = [];
      const c = hold.push(t);
      if (c) { out.push({ content: c }); sent += c; }
      if (!hold.cut()) return out;
      const h = hold.held();
      const evs = scan.feed(h.slice(fed));
      fed = h.length;
      // one delta per call per push: a header with the arguments so far, or the arguments' new text
      for (const e of evs) {
        const last = out.at(-1), lt = last && last.tool_calls && last.tool_calls[0];
        if (lt && lt.index === e.index && !e.id) lt.function.arguments += e.args;
        else out.push({ tool_calls: [asDelta(e)] });
      }
      return out;
    },
    finish(final, content) {
      const out = [];
      if (final && final.length) {
        // the parse's calls in order against the streamed ones (indices 0..k-1): a streamed call that agrees
        // (its name, its arguments so far a prefix) is completed; one the parse does not have (text that
        // looked like a call and was not) is passed over; a parsed call not streamed comes whole after them
        const shown = calls.filter((c) => c.shown);
        let j = 0, next = shown.length;
        const agrees = (st, f) => st.name === f.function.name && f.function.arguments.startsWith(st.args);
        for (const f of final) {
          while (j < shown.length && !agrees(shown[j], f)) j++;
          if (j < shown.length) {
            const st = shown[j];
            f.id = ids[j]; // the streamed call's id
            if (f.function.arguments.length > st.args.length) {
              out.push({ tool_calls: [{ index: j, function: { arguments: f.function.arguments.slice(st.args.length) } }] });
            }
            j++;
          } else {
            out.push({ tool_calls: [{ index: next++, id: f.id, type: 'function', function: { name: f.function.name, arguments: f.function.arguments } }] });
          }
        }
        const s = sent.trim();
        if (content && content.startsWith(s) && content.length > s.length) out.push({ content: content.slice(s.length) });
      } else if (!calls.some((c) => c.shown) && hold.held()) {
        out.push({ content: hold.held() });
      }
      return out;
    },
    streamed: () => calls.some((c) => c.shown),
  };
}

// The OpenAI shape of a result's calls: ids of their own, the arguments' text as generated.
const openaiCalls = (calls) => calls.map((c) => ({ id: newId('call_'), type: 'function', function: { name: c.function.name, arguments: c.function.arguments } }));

async function structuredChat(model, req) {
  const opts = commonOptions(req);
  const constraint = constraintOf(req);
  const t = toolsOf(req);
  if (constraint && t.tools && t.choice !== 'auto' && t.choice !== 'none') throw bad('response_format/grammar and a required tool call cannot both constrain a reply');
  const messages = templateMessages(req.messages);
  const last = messages[messages.length - 1];
  // a chat session (the C session's rendering, as without structure) unless the template must see tools or
  // tool messages, or the conversation ends with something other than the user's message
  const session = !(t.tools && t.choice !== 'none') && last.role === 'user' &&
    messages.every((m) => m.role !== 'tool' && !m.tool_calls);
  let plan;
  if (session) {
    const { system, before, last: text } = parseMessages(req.messages);
    plan = { mode: 'session', system, before, last: text };
  } else {
    plan = { mode: 'render', messages };
  }
  Object.assign(plan, { constraint, tools: t.tools, toolChoice: t.choice, parallel: t.parallel, toolFormat: t.format,
    maxTokens: opts.maxTokens, sampling: opts.sampling, stop: opts.stop });
  const id = newId('chatcmpl-'), created = Math.floor(Date.now() / 1000), name = req.model || model.name || 'llamaweb';
  const base = (choices) => ({ id, object: 'chat.completion.chunk', created, model: name, choices });
  const usage = (r) => ({
    prompt_tokens: r.fromCell + r.decodedTokens, completion_tokens: r.tokens.length,
    total_tokens: r.fromCell + r.decodedTokens + r.tokens.length, prompt_tokens_details: { cached_tokens: r.fromCell },
  });
  const calling = !!(t.tools && t.choice !== 'none');
  const calls = calling ? toolCallStream(t.format) : null;
  let sentRole = false;
  const chunk = (delta) => {
    const d = sentRole ? delta : { role: 'assistant', ...delta };
    sentRole = true;
    return base([{ index: 0, delta: d, logprobs: null, finish_reason: null }]);
  };
  const start = runPlan(model, plan);
  // streaming with tools: each piece's deltas (content, tool_calls) go out as chunks of their own
  const startCalls = (onToken, signal) => start((text) => { for (const d of calls.push(text)) onToken(d); }, signal);
  return run(model, opts, calls ? startCalls : start,
    (d) => chunk(typeof d === 'string' ? { content: d } : d), (r, streaming) => {
      const found = r.toolCalls && r.toolCalls.calls.length ? openaiCalls(r.toolCalls.calls) : null;
      const reason = found ? 'tool_calls' : finishReason(r.reason);
      if (streaming) {
        return (function* () {
          if (calls) for (const d of calls.finish(found, r.toolCalls && r.toolCalls.content)) yield chunk(d);
          if (!sentRole) yield chunk({ content: '' });
          yield { ...base([{ index: 0, delta: {}, logprobs: null, finish_reason: reason }]), usage: usage(r) };
        })();
      }
      const message = found ? { role: 'assistant', content: r.toolCalls.content || null, tool_calls: found }
        : { role: 'assistant', content: r.text };
      return {
        id, object: 'chat.completion', created, model: name,
        choices: [{ index: 0, message, logprobs: null, finish_reason: reason }],
        usage: usage(r),
      };
    });
}

// completions.create with response_format or grammar (an extension; OpenAI's completions have neither).
async function structuredCompletion(model, req) {
  const opts = commonOptions(req);
  if (req.tools !== undefined && req.tools !== null) throw bad('completions take no tools (use chat.completions)');
  const constraint = constraintOf(req);
  let prompt = req.prompt;
  if (Array.isArray(prompt) && prompt.length === 1 && typeof prompt[0] === 'string') prompt = prompt[0];
  const ids = Array.isArray(prompt) && prompt.every((x) => Number.isInteger(x) && x >= 0);
  if (typeof prompt !== 'string' && !ids) throw bad('prompt must be a string, [string] or an array of token ids');
  const plan = { mode: 'text', prompt, constraint, maxTokens: opts.maxTokens, sampling: opts.sampling, stop: opts.stop };
  const id = newId('cmpl-'), created = Math.floor(Date.now() / 1000), name = req.model || model.name || 'llamaweb';
  const base = (choices) => ({ id, object: 'text_completion', created, model: name, choices });
  const usage = (r) => ({ prompt_tokens: r.promptTokens, completion_tokens: r.tokens.length, total_tokens: r.promptTokens + r.tokens.length,
    prompt_tokens_details: { cached_tokens: r.fromCell } });
  return run(model, opts, runPlan(model, plan), (text) => base([{ index: 0, text, logprobs: null, finish_reason: null }]), (r, streaming) => {
    const choice = (text) => ({ index: 0, text, logprobs: null, finish_reason: finishReason(r.reason) });
    if (streaming) return [{ ...base([choice('')]), usage: usage(r) }][Symbol.iterator]();
    return { ...base([choice(r.text)]), usage: usage(r) };
  });
}

// ---------------------------------------------------------------------------------------------------------
// Embeddings
// ---------------------------------------------------------------------------------------------------------

// embeddings.create({input: string | [string] | [id] | [[id]], encoding_format: 'float' | 'base64',
// dimensions (only n_embd), pooling, normalize (extensions: web/lw-structured.mjs embedRun; default the
// file's pooling or mean, L2-normalised as llama.cpp's server does), signal}) -> OpenAI's list object.
async function embeddings(model, req) {
  if (!req || typeof req !== 'object') throw bad('create() takes a request object');
  let input = req.input;
  if (typeof input === 'string' || (Array.isArray(input) && input.length > 0 && input.every((x) => Number.isInteger(x)))) input = [input];
  if (!Array.isArray(input) || input.length === 0 ||
    !input.every((x) => (typeof x === 'string' && x.length > 0) || (Array.isArray(x) && x.length > 0 && x.every((y) => Number.isInteger(y) && y >= 0)))) {
    throw bad('input must be a non-empty string, an array of them, or token ids ([id] or [[id]])');
  }
  const format = req.encoding_format ?? 'float';
  if (format !== 'float' && format !== 'base64') throw bad("encoding_format must be 'float' or 'base64'");
  const signal = req.signal ?? undefined;
  if (signal && signal.aborted) throw aborted();
  const opts = { pooling: req.pooling ?? undefined, normalize: req.normalize ?? undefined };
  if (model.openaiRunning_) throw bad('a request is already running on this model');
  model.openaiRunning_ = true;
  const stop = () => model.stop();
  if (signal) signal.addEventListener('abort', stop, { once: true });
  let r;
  try {
    r = model.rpc ? await model.rpc.call({ op: 'embed', handle: model.handle, inputs: input, opts }) : await embedRun(model, input, opts);
    if (signal && signal.aborted) throw aborted();
  } catch (e) {
    throw signal && signal.aborted ? aborted() : LlamawebError.from(e);
  } finally {
    if (signal) signal.removeEventListener('abort', stop);
    model.openaiRunning_ = false;
  }
  if (req.dimensions !== undefined && req.dimensions !== null && req.dimensions !== r.nEmbd) {
    throw bad(`dimensions: this model's vectors have ${r.nEmbd} (no other size is offered)`);
  }
  const encode = (v) => {
    if (format === 'float') return Array.from(v);
    const b = new Uint8Array(v.buffer, v.byteOffset, v.byteLength);
    let s = '';
    for (let i = 0; i < b.length; i += 0x8000) s += String.fromCharCode(...b.subarray(i, i + 0x8000));
    return btoa(s);
  };
  const total = r.tokens.reduce((a, n) => a + n, 0);
  return {
    object: 'list', model: req.model || model.name || 'llamaweb',
    data: r.vectors.map((v, index) => ({ object: 'embedding', index, embedding: encode(v) })),
    usage: { prompt_tokens: total, total_tokens: total },
  };
}

// ---------------------------------------------------------------------------------------------------------
// Attaching to a model
// ---------------------------------------------------------------------------------------------------------

// Gives model (Model or WorkerModel) chat.completions.create, completions.create and embeddings.create. model.chat stays the
// function it was (chat(messages, opts): a rendered conversation generated as generate() does); the API
// hangs on it. Each create() returns a promise (of the result, or of the chunks' async iterable).
export function attachOpenAI(model) {
  const chat = model.chat.bind(model);
  chat.completions = { create: (req) => chatCompletion(model, req) };
  model.chat = chat;
  model.completions = { create: (req) => completion(model, req) };
  model.embeddings = { create: (req) => embeddings(model, req) };
  model.openaiRunning_ = false; // a create() is running (one at a time per model)
}
