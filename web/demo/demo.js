// The llamaweb demo page (web/demo/index.html): pick, drop, fetch or reopen a GGUF model, generate with the
// text streaming in, or chat (a conversation object, model.newChat: each message decodes only its new part,
// the KV cache keeps the earlier turns), see load time, tokens/s and what the GPU offers. Uses only the
// package's browser entry.
//
// The page's progress is mirrored in document.body.dataset.state ('starting', 'no-webgpu', 'gpu-ready' (or
// 'cpu-ready': the CPU engine alone, ?device=auto|cpu without WebGPU), 'loading', 'loaded', 'generating',
// 'done', 'error') and window.lwDemo (adapter, model, last result, error) so automated tests
// (tests/web/demo.test.mjs) can follow it. ?device= picks the engine (default auto: WebGPU where a real GPU
// offers it, else the CPU engine; the select reloads).
import { Llamaweb, listOpfs, downloadToOpfs, webgpuMissingReason } from '../llamaweb.mjs';

const $ = (id) => document.getElementById(id);
const demo = (window.lwDemo = { adapter: null, model: null, result: null, error: null, loadMs: 0, pieces: 0 });
let lw = null;    // the engine (wasm module + device)
let model = null; // the open model
let conversation = null; // the chat (model.newChat) while "chat" is ticked: later messages reuse its cache
let transcript = '';     // the conversation's text so far, shown above the reply being generated

function setState(s) {
  document.body.dataset.state = s;
}

function showError(msg) {
  demo.error = String(msg);
  const e = $('error');
  e.textContent = demo.error;
  e.hidden = false;
  setState('error');
}

function clearError() {
  demo.error = null;
  $('error').hidden = true;
}

const mib = (n) => (n / 1048576).toFixed(n < 10485760 ? 2 : 1) + ' MiB';

function pill(label, yes) {
  const s = document.createElement('span');
  s.className = 'pill' + (yes ? ' yes' : '');
  s.textContent = `${label}: ${yes ? 'yes' : 'no'}`;
  return s;
}

// No WebGPU device: the CPU engine (wasm, simd128; threads on cross-origin isolated pages).
function showCpu(why, inWorker, threads) {
  const el = $('adapter');
  el.textContent = '';
  const line = document.createElement('div');
  line.textContent = `CPU engine (wasm): ${threads} thread${threads === 1 ? '' : 's'} wanted`;
  const hint = document.createElement('div');
  hint.className = 'hint';
  hint.textContent = `no WebGPU: ${why}; cross-origin isolated: ${self.crossOriginIsolated ? 'yes' : 'no'}; ` +
    `engine ${inWorker ? 'in a worker' : 'on the page\'s thread'}`;
  el.append(line, hint);
}

function showAdapter(a, inWorker) {
  const el = $('adapter');
  el.textContent = '';
  const name = [a.vendor, a.architecture, a.device, a.description].filter(Boolean).join(' · ') || 'unnamed adapter';
  const line = document.createElement('div');
  line.textContent = `Adapter: ${name}`;
  el.append(line, pill('shader-f16', a.f16), pill('subgroups', a.subgroups));
  const lim = document.createElement('div');
  lim.className = 'hint';
  lim.textContent = `max buffer ${mib(a.maxBufferSize)}, max storage binding ${mib(a.maxStorageBufferBindingSize)}` +
    (a.subgroups && a.subgroupMinSize ? `, subgroup size ${a.subgroupMinSize}–${a.subgroupMaxSize}` : '') +
    `; cross-origin isolated: ${self.crossOriginIsolated ? 'yes' : 'no'}; engine ${inWorker ? 'in a worker' : 'on the page\'s thread'}`;
  el.append(lim);
}

// One thing at a time: a load, a download or a generation (drops and links are ignored meanwhile).
let working = false;

function busy(on) {
  working = on;
  for (const id of ['file', 'load-url', 'save-url']) $(id).disabled = on || !lw;
  $('go').disabled = on || !model;
  $('more').disabled = on || !model || !demo.result || demo.result.reason === 'context' || chatMode();
  $('new-chat').disabled = on || !conversation;
}

// Whether the prompt is the next message of the conversation (else plain text generation).
function chatMode() {
  return !!model && $('chat').checked;
}

// Forgets the conversation (the next message starts a new one).
function endConversation() {
  if (conversation) conversation.free();
  conversation = null;
  transcript = '';
  demo.turns = 0;
}

// ---- loading -------------------------------------------------------------------------------------------

async function openModel(what, label) {
  if (!lw || working) return;
  clearError();
  busy(true);
  setState('loading');
  endConversation();
  if (model) { model.free(); model = null; demo.model = null; demo.result = null; }
  const prog = $('progress');
  prog.hidden = false;
  prog.value = 0;
  $('model-info').textContent = `loading ${label}…`;
  try {
    model = await lw.open(what, {
      nCtx: Number($('ctx').value) || 2048,
      onProgress: (done, total) => { prog.value = total ? done / total : 0; },
    });
    const i = model.info;
    demo.model = i;
    demo.chatTemplate = model.chatTemplate;
    // any model can chat (without a template: the plain "User:/Assistant:" format); chat models by default
    $('chat-row').hidden = false;
    $('chat').checked = model.chatTemplate;
    $('chat-kind').textContent = model.chatTemplate ? 'the model\'s chat template' : 'the plain "User: / Assistant:" format (the model has no chat template)';
    demo.loadMs = model.loadMs;
    demo.device = model.device;
    const where = model.device === 'cpu'
      ? `weights ${mib(i.weightBytes)} + context ${mib(i.contextBytes)} in the wasm heap (CPU engine, ${i.threads} ` +
        `thread${i.threads === 1 ? '' : 's'}, ${model.build} build${model.gpuFailure ? '; WebGPU failed: ' + model.gpuFailure : ''})`
      : `weights ${mib(i.weightBytes)} + KV cache ${mib(i.kvBytes)} on the GPU`;
    $('model-info').textContent = `${label}: ${i.arch}, ${i.n_layer} blocks, embedding ${i.n_embd}, vocab ${i.n_vocab}, ` +
      `context ${i.n_ctx}; ${where}; loaded in ${model.loadMs.toFixed(0)} ms`;
    setState('loaded');
  } catch (e) {
    $('model-info').textContent = '';
    showError(`Could not load ${label}: ${e.message}`);
  } finally {
    prog.hidden = true;
    busy(false);
  }
}

async function refreshOpfs() {
  let files = [];
  try {
    files = navigator.storage && navigator.storage.getDirectory ? (await listOpfs()).filter((f) => f.name.endsWith('.gguf')) : [];
  } catch {
    files = [];
  }
  $('opfs').hidden = files.length === 0;
  const list = $('opfs-list');
  list.textContent = '';
  for (const f of files) {
    const b = document.createElement('button');
    b.className = 'link';
    b.textContent = `${f.name} (${mib(f.size)})`;
    b.onclick = () => openModel({ opfs: f.name }, f.name + ' (browser storage)');
    list.append(b);
  }
}

// Models the server offers (node web/serve.mjs --models DIR); nothing when it offers none.
async function refreshServed() {
  try {
    const r = await fetch('/models/');
    if (!r.ok) return;
    const files = await r.json();
    const list = $('served-list');
    list.textContent = '';
    for (const f of files) {
      const b = document.createElement('button');
      b.className = 'link';
      b.textContent = `${f.name} (${mib(f.size)})`;
      b.onclick = () => { $('url').value = new URL(f.url, location.href).href; openModel(f.url, f.name); };
      list.append(b);
    }
    $('served').hidden = files.length === 0;
  } catch {
    // not our server: nothing to list
  }
}

// ---- generation ----------------------------------------------------------------------------------------

// Sampling parameters from the form, or undefined (greedy) at temperature 0 or when the engine cannot sample.
function samplingParams() {
  const temp = Number($('temp').value);
  if ($('sampling').hidden || !(temp > 0)) return undefined;
  return { temp, topK: Number($('topk').value), topP: Number($('topp').value), seed: Number($('seed').value) };
}

function showDecoding() {
  $('decoding').textContent = samplingParams() ? `sampling on the ${model && model.device === 'cpu' ? 'CPU' : 'GPU'}` : 'greedy decoding';
}

// more: go on from where the last text stopped (same context) instead of starting again from the prompt.
async function generate(more = false) {
  if (!model || working) return;
  clearError();
  busy(true);
  $('stop').disabled = false;
  setState('generating');
  showDecoding();
  const prompt = more ? '' : $('prompt').value;
  const chat = !more && chatMode();
  const gen = $('out-gen');
  const head = chat ? (transcript ? transcript + '\n\n' : '') + 'You: ' + prompt + '\n' : prompt;
  if (!more) {
    $('out-prompt').textContent = head;
    gen.textContent = '';
  }
  $('stats').textContent = '';
  demo.pieces = 0; // onToken calls: the text arrives piece by piece
  try {
    const opts = {
      maxTokens: Number($('n').value) || 128,
      keepContext: more,
      sampling: samplingParams(),
      onToken: (text) => { demo.pieces++; gen.textContent += text; },
    };
    if (chat && !conversation) {
      conversation = model.newChat();
      demo.turns = 0;
    }
    const r = chat ? await conversation.send(prompt, opts) : await model.generate(prompt, opts);
    demo.result = r;
    const tail = `generated ${r.tokens.length} tokens at ${r.tokensPerSecond.toFixed(1)} tokens/s; ended by: ${r.reason}; ` +
      `model load ${model.loadMs.toFixed(0)} ms`;
    if (chat) { // the cache kept the earlier turns: only the new part of the conversation was decoded
      transcript = head + r.text;
      demo.turns++;
      $('stats').textContent = `turn ${demo.turns}: decoded ${r.decodedTokens} new prompt tokens at cell ${r.fromCell} ` +
        `(${r.fromCell} reused${r.restarted ? '; the context was full: the conversation started over' : ''}) in ` +
        `${r.promptMs.toFixed(0)} ms; ${tail}`;
    } else {
      $('stats').textContent = `prompt ${r.promptTokens} tokens in ${r.promptMs.toFixed(0)} ms ` +
        `(${r.promptTokensPerSecond.toFixed(1)} tokens/s); ${tail}`;
    }
    setState('done');
  } catch (e) {
    showError('Generation failed: ' + e.message);
  } finally {
    $('stop').disabled = true;
    busy(false);
  }
}

// ---- wiring --------------------------------------------------------------------------------------------

function wire() {
  $('file').addEventListener('change', (ev) => {
    const f = ev.target.files && ev.target.files[0];
    if (f) openModel(f, f.name);
  });
  const drop = $('drop');
  drop.addEventListener('dragover', (ev) => { ev.preventDefault(); drop.classList.add('over'); });
  drop.addEventListener('dragleave', () => drop.classList.remove('over'));
  drop.addEventListener('drop', (ev) => {
    ev.preventDefault();
    drop.classList.remove('over');
    const f = ev.dataTransfer.files && ev.dataTransfer.files[0];
    if (f) openModel(f, f.name);
  });
  $('load-url').onclick = () => { const u = $('url').value.trim(); if (u) openModel(u, u.split('/').pop()); };
  $('save-url').onclick = async () => {
    const u = $('url').value.trim();
    if (!u || working) return;
    const name = decodeURIComponent(new URL(u, location.href).pathname.split('/').pop() || 'model.gguf');
    clearError();
    busy(true);
    const prog = $('progress');
    prog.hidden = false;
    $('model-info').textContent = `saving ${name} into browser storage…`;
    try {
      await downloadToOpfs(u, name, { onProgress: (d, t) => { prog.value = t ? d / t : 0; } });
      await refreshOpfs();
      busy(false);
      await openModel({ opfs: name }, name + ' (browser storage)');
    } catch (e) {
      showError(`Could not save ${u}: ${e.message}`);
    } finally {
      prog.hidden = true;
      busy(false);
    }
  };
  $('go').onclick = () => generate(false);
  $('more').onclick = () => generate(true);
  $('stop').onclick = () => model && model.stop();
  $('new-chat').onclick = () => {
    endConversation();
    $('out-prompt').textContent = '';
    $('out-gen').textContent = '';
    $('stats').textContent = '';
    busy(working);
  };
  $('chat').addEventListener('change', () => busy(working));
  $('prompt').addEventListener('keydown', (ev) => {
    if (ev.key === 'Enter' && (ev.ctrlKey || ev.metaKey) && !$('go').disabled) generate();
  });
}

async function main() {
  wire();
  busy(true);
  const q = new URLSearchParams(location.search);
  if (q.has('prompt')) $('prompt').value = q.get('prompt');
  if (q.has('n')) $('n').value = q.get('n');
  if (q.has('ctx')) $('ctx').value = q.get('ctx');
  if (q.has('temp')) $('temp').value = q.get('temp');
  if (q.has('seed')) $('seed').value = q.get('seed');

  const device = ['webgpu', 'auto', 'cpu'].includes(q.get('device')) ? q.get('device') : 'auto';
  $('device').value = device;
  $('device').addEventListener('change', () => {
    const u = new URL(location.href);
    u.searchParams.set('device', $('device').value);
    location.href = u.href;
  });
  const threads = q.has('threads') ? Number(q.get('threads')) : undefined;
  const why = webgpuMissingReason();
  if (why && device === 'webgpu') {
    $('adapter').textContent = 'WebGPU is not available.';
    showError(why + ' (or choose the CPU engine: device auto or cpu)');
    setState('no-webgpu');
    return;
  }
  // the engine in a worker (the page never waits on it) unless ?worker=0 puts it on this thread
  const inWorker = q.get('worker') !== '0';
  try {
    lw = inWorker ? await Llamaweb.loadInWorker({ device, threads }) : await Llamaweb.load({ device, threads });
  } catch (e) {
    const gpu = /WebGPU|adapter/.test(e.message); // else the module itself (not built, not served, ...)
    $('adapter').textContent = gpu ? 'WebGPU is not available.' : 'The engine could not start.';
    showError(e.message);
    setState(gpu ? 'no-webgpu' : 'error');
    return;
  }
  demo.adapter = lw.adapter;
  // sampling controls where the engine draws tokens on the GPU
  $('sampling').hidden = !lw.canSample;
  demo.canSample = lw.canSample;
  $('temp').addEventListener('input', showDecoding);
  showDecoding();
  demo.inWorker = inWorker;
  // memory now: the wasm heap (stays small: weights live in GPU buffers) and, where Chrome tells, the JS heap
  demo.memory = async () => lw.memory();
  demo.conversation = () => conversation; // the Chat (WorkerChat in the worker) while one is going on
  if (lw.adapter) {
    showAdapter(lw.adapter, inWorker);
    setState('gpu-ready');
  } else {
    showCpu(lw.gpuError, inWorker, lw.threads);
    setState('cpu-ready');
  }
  busy(false);
  await Promise.all([refreshServed(), refreshOpfs()]);
  if (q.has('model')) {
    $('url').value = q.get('model');
    await openModel(q.get('model'), q.get('model').split('/').pop());
    if (model && q.get('autorun') === '1') await generate();
  }
}

main().catch((e) => showError(e && e.stack || e));
