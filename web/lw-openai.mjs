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
// Attaching to a model
// ---------------------------------------------------------------------------------------------------------

// Gives model (Model or WorkerModel) chat.completions.create and completions.create. model.chat stays the
// function it was (chat(messages, opts): a rendered conversation generated as generate() does); the API
// hangs on it. Each create() returns a promise (of the result, or of the chunks' async iterable).
export function attachOpenAI(model) {
  const chat = model.chat.bind(model);
  chat.completions = { create: (req) => chatCompletion(model, req) };
  model.chat = chat;
  model.completions = { create: (req) => completion(model, req) };
  model.openaiRunning_ = false; // a create() is running (one at a time per model)
}
