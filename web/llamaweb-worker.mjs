// The llamaweb engine in a dedicated module Worker, so a page's main thread never waits on the wasm module
// (tokenizing, planning, the per-token JS of the decode loop). Started by Llamaweb.loadInWorker() in
// web/llamaweb.mjs, which gives the page the same interface as Llamaweb.load(); this file is the worker side.
//
// Protocol (structured clone; one request at a time per model, as the engine's):
//   page -> worker  {id, op: 'load' | 'memory' | 'open' | 'abortOpen' | 'generate' | 'chat' | 'render' | 'tokenize' |
//                   'detokenize' | 'modelMemory' | 'stop' | 'free', ...}; open's `what`: a URL, File/Blob,
//                   {opfs: name} or an array of them (a split GGUF's parts)
//                   conversations: {id, op: 'newChat', handle, opts} -> {chat, template};
//                   {id, op: 'send' | 'chatMessages' | 'chatTokens' | 'chatAdd' | 'chatReset' | 'chatFree', chat, ...}
//                   structured output and embeddings (web/lw-structured.mjs): {id, op: 'structured', handle,
//                   plan} -> structuredRun's result (tokens as events); {id, op: 'embed', handle, inputs, opts}
//   worker -> page  {id, ok: true, value} | {id, ok: false, error, code?, status?, statusText?} (a LlamawebError's
//                   fields); {id, token: text, tokenId} while generating;
//                   {id, progress: [done, total, phase, state]} while loading (Llamaweb.open's onProgress)
// Models and conversations are named by small integers (handles) in this worker.
import { Llamaweb } from './llamaweb.mjs';
import { structuredRun, embedRun } from './lw-structured.mjs';

let lw = null;           // the engine, after 'load'
const models = [null];   // handle -> Model
const chats = [null];    // chat handle -> Chat (model.newChat)
const opens = new Map(); // key -> AbortController of an open() in progress (the page's signal)

// What the page learns about an open model (Model itself stays here).
function describe(h, m) {
  return { handle: h, name: m.name, device: m.device, info: m.info, loadMs: m.loadMs, loadStats: m.loadStats, uploadCheck: m.uploadCheck || null,
    headBytes: m.headBytes, headTries: m.headTries, gpuFailure: m.gpuFailure, build: m.build, threadsError: m.threadsError,
    chatTemplate: m.chatTemplate, chatError: m.chatError, download: m.download };
}

async function handle(msg) {
  const { id, op } = msg;
  if (op === 'load') {
    lw = await Llamaweb.load(msg.opts || {});
    return { adapter: lw.adapter, canSample: lw.canSample, preference: lw.preference, gpuError: lw.gpuError, threads: lw.threads };
  }
  if (!lw) throw new Error('llamaweb worker: load first');
  if (op === 'memory') return lw.memory();
  if (op === 'open') { // msg.key names the open for 'abortOpen' (the page's AbortSignal)
    const ac = new AbortController();
    if (msg.key) opens.set(msg.key, ac);
    try {
      const m = await lw.open(msg.what, { ...msg.opts, signal: ac.signal, onProgress: (...p) => postMessage({ id, progress: p }) });
      models.push(m);
      return describe(models.length - 1, m);
    } finally {
      opens.delete(msg.key);
    }
  }
  if (op === 'abortOpen') {
    const ac = opens.get(msg.key);
    if (ac) ac.abort();
    return !!ac;
  }
  if (op === 'send' || (op.startsWith('chat') && op !== 'chat')) { // a conversation's requests
    const c = chats[msg.chat];
    if (!c) throw new Error('llamaweb worker: no chat ' + msg.chat);
    if (op === 'send') return c.send(msg.text, { ...msg.opts, onToken: (text, tokenId) => postMessage({ id, token: text, tokenId }) });
    if (op === 'chatMessages') return c.messages();
    if (op === 'chatTokens') return c.tokens();
    if (op === 'chatAdd') return c.add(msg.role, msg.content);
    if (op === 'chatReset') return c.reset();
    if (op === 'chatFree') {
      c.free();
      chats[msg.chat] = null;
      return null;
    }
    throw new Error('llamaweb worker: unknown op ' + op);
  }
  const m = models[msg.handle];
  if (!m) throw new Error('llamaweb worker: no model ' + msg.handle);
  if (op === 'newChat') {
    const c = m.newChat(msg.opts || {});
    chats.push(c);
    return { chat: chats.length - 1, template: c.template };
  }
  if (op === 'generate' || op === 'chat') { // chat: prompt holds the messages
    const opts = { ...msg.opts, onToken: (text, tokenId) => postMessage({ id, token: text, tokenId }) };
    return op === 'chat' ? m.chat(msg.prompt, opts) : m.generate(msg.prompt, opts);
  }
  if (op === 'modelMemory') return m.memory();
  if (op === 'structured') { // constrained output / tools (web/lw-openai.mjs's plan; 'stop' ends it)
    return structuredRun(m, msg.plan, (text, tokenId) => postMessage({ id, token: text, tokenId }));
  }
  if (op === 'embed') return embedRun(m, msg.inputs, msg.opts || {});
  if (op === 'render') return m.renderChat(msg.messages, msg.addGenerationPrompt);
  if (op === 'tokenize') return msg.special ? m.tokenizeSpecial(msg.text, msg.addSpecial) : m.tokenize(msg.text, msg.addSpecial);
  if (op === 'detokenize') return m.detokenize(msg.ids);
  if (op === 'stop') return m.stop();
  if (op === 'free') {
    m.free();
    models[msg.handle] = null;
    return null;
  }
  throw new Error('llamaweb worker: unknown op ' + op);
}

self.onmessage = (ev) => {
  const msg = ev.data;
  handle(msg).then((value) => postMessage({ id: msg.id, ok: true, value }),
    (e) => postMessage({ id: msg.id, ok: false, error: String(e && e.message || e), code: e && e.code,
      status: e && e.status, statusText: e && e.statusText }));
};
