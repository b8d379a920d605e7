// Structured output, tool calls and embeddings through the OpenAI-shaped API (web/lw-openai.mjs,
// web/lw-structured.mjs, web/lw-wasm-structured.c) on the CPU engine (always) and on WebGPU (Node + Dawn,
// where a Vulkan driver is there; lavapipe). Checks:
//  - response_format json_schema on stories260K: greedy text equals the native CLI's (`llamaweb run
//    --json-schema`, the same grammar and sampler: CPU engine), parses and validates against the schema
//    (python's jsonschema where it is installed); sampled JSON-mode and schema replies over several seeds all
//    parse (and validate); a GBNF grammar keeps replies in its language; streaming equals the result;
//  - WebGPU: the same constrained replies parse and validate; the grammar's mask applied on the GPU (the
//    default) gives the same greedy ids as the logits read back with the CPU sampler picking (gpuMask false),
//    every id picked on the GPU (maskedSteps, grammar.gpuSteps), no buffer, pipeline or bind group created;
//    the cost of a grammar per step is printed (tokens/s with and without, both engines);
//  - tools on a synthetic ChatML model whose template renders tools as Qwen's does: tool_choice 'required'
//    gives OpenAI-shaped tool_calls whose arguments validate against the tool's parameters, a named tool
//    only that one, parallel_tool_calls false one call; the stream's tool_calls deltas (a header per call,
//    then the arguments in pieces) join to the result;
//    the rendered prompt holds the tools' JSON; a conversation ending with a tool result renders and answers;
//  - embeddings.create equals `llamaweb embed` (mean / last / cls pooling, L2): cosine >= 0.9999 and within 1e-4 on the
//    CPU engine, 1e-3 on WebGPU (one-token steps, its sums); the OpenAI list object, base64 encoding;
//  - typed errors: BAD_INPUT for a bad schema, a bad grammar, a bad response_format, tool_choice naming no
//    tool, bad embeddings input.
// Run: LW_WASM_DIR=... LW_CLI=build-NAME/llamaweb [VK_ICD_FILENAMES=...] node --test tests/web/structured.test.mjs
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, readFileSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { execFileSync } from 'node:child_process';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { setup, loadModule, repoRoot } from '../../web/lw-node.mjs';
import { nativeCli, cliRun } from './native-cli.mjs';
import { Llamaweb, LlamawebError, bytesSource } from '../../web/llamaweb.mjs';
import { Grammar, grammarText, structuredRun } from '../../web/lw-structured.mjs';

const shared = process.env.LW_SHARED || path.resolve(repoRoot(), '../shared');
const stories = path.join(shared, 'models/stories260K.gguf');
const cli = nativeCli;

const M = await loadModule();
const skip = !M ? 'the wasm build is missing (scripts/build-wasm.sh, LW_WASM_DIR)' :
  typeof M._lw_wasm_grammar_new !== 'function' ? 'this wasm build has no grammars (web/lw-wasm-structured.c)' :
    !cli ? 'no native llamaweb CLI (scripts/build.sh, or LW_CLI)' : !existsSync(stories) ? `no ${stories} (the shared test models)` : false;
if (skip) console.log('SKIP: ' + skip);
const gpu0 = skip ? { skip } : await setup();
// SwiftShader spends tens of seconds compiling pipelines: there only with LW_TEST_SLOW=1 (lavapipe always)
const slowDriver = /swiftshader/i.test(gpu0.info && gpu0.info.architecture || '') && process.env.LW_TEST_SLOW !== '1';
const gpu = slowDriver ? { skip: 'SwiftShader (slow pipeline compiles; LW_TEST_SLOW=1 runs it)' } : gpu0;
if (!skip && gpu.skip) console.log('SKIP (WebGPU part): ' + gpu.skip);
after(() => setTimeout(() => process.exit(process.exitCode ?? 0), 100)); // Dawn keeps the process alive

const slow = process.env.LW_TEST_SLOW === '1'; // more seeds and the WebGPU engine's full set
let python = null; // python3 with jsonschema: the validator
try {
  execFileSync('python3', ['-c', 'import jsonschema'], { stdio: 'ignore' });
  python = 'python3';
} catch {
  console.log('# no python3 jsonschema: replies are checked to parse, not validated');
}
// Validates each instance against schema with python's jsonschema; returns the error messages ('' = valid).
function validate(schema, instances) {
  if (!python) return instances.map(() => '');
  const code = 'import json,sys,jsonschema\nd=json.load(sys.stdin)\nfor x in d["xs"]:\n' +
    '  try:\n    jsonschema.validate(x, d["s"]); print("")\n  except jsonschema.ValidationError as e:\n    print(e.message.replace("\\n"," "))\n';
  const out = execFileSync(python, ['-c', code], { input: JSON.stringify({ s: schema, xs: instances }), encoding: 'utf8' });
  return out.split('\n').slice(0, instances.length);
}

const tmp = mkdtempSync(path.join(process.env.LW_TMP || tmpdir(), 'lw-structured-'));
after(() => rmSync(tmp, { recursive: true, force: true }));

const PERSON = {
  type: 'object',
  properties: { name: { type: 'string', maxLength: 8 }, kind: { enum: ['cat', 'dog', 'girl'] }, happy: { type: 'boolean' },
    tags: { type: 'array', items: { type: 'boolean' }, maxItems: 2 } },
  required: ['name', 'kind'],
};
const WEATHER = { type: 'function', function: { name: 'get_weather', description: 'Weather',
  parameters: { type: 'object', properties: { city: { type: 'string', maxLength: 10 }, unit: { enum: ['c', 'f'] } }, required: ['city', 'unit'] } } };
const TIME = { type: 'function', function: { name: 'get_time', parameters: { type: 'object', properties: { zone: { type: 'integer' } }, required: ['zone'] } } };
const paramsOf = (name) => [WEATHER, TIME].find((t) => t.function.name === name).function.parameters;

// scripts/test-webgpu.sh runs this file once per Vulkan driver: the CPU engine's part once (not under
// SwiftShader's run unless LW_TEST_SLOW=1)
const cpuPart = !/swiftshader/i.test(process.env.VK_ICD_FILENAMES || '') || slow;
const engines = skip ? [] : [...(cpuPart ? [['cpu', new Llamaweb(M, null)]] : []), ...(gpu.skip ? [] : [['webgpu', new Llamaweb(gpu.Module, gpu.device)]])];
const storiesBytes = skip ? null : readFileSync(stories);
const models = new Map(); // device -> stories260K model
after(() => { for (const m of models.values()) m.free(); });
async function storiesOn(dev, lw) {
  if (!models.has(dev)) models.set(dev, await lw.open(bytesSource(storiesBytes), { nCtx: 256, device: dev }));
  return models.get(dev);
}

async function collect(stream) {
  const chunks = [];
  for await (const c of stream) chunks.push(c);
  return chunks;
}

for (const [dev, lw] of engines) {
  test(`${dev}: response_format json_schema / json_object and grammar constrain replies (stories260K)`, { timeout: 300000 }, async () => {
    const m = await storiesOn(dev, lw);
    const prompt = 'Once upon a time';
    const r = await m.completions.create({ prompt, max_tokens: 160, temperature: 0, response_format: { type: 'json_schema', json_schema: { name: 'p', schema: PERSON } } });
    const text = r.choices[0].text;
    console.log(`# ${dev}: greedy schema reply ${JSON.stringify(text)} (${r.choices[0].finish_reason})`);
    assert.equal(r.choices[0].finish_reason, 'stop', 'the grammar ended the reply (end of generation)');
    const obj = JSON.parse(text);
    assert.deepEqual(validate(PERSON, [obj]), ['']);
    if (dev === 'cpu') {
      const f = path.join(tmp, 'person.json');
      writeFileSync(f, JSON.stringify(PERSON));
      assert.equal(text, cliRun(stories, prompt, 160, ['--temp', '0', '--json-schema', f]), 'the native CLI\'s constrained greedy text');
    }
    // streamed = the result (CPU engine; WebGPU with LW_TEST_SLOW=1)
    if (dev === 'cpu' || slow) {
      const chunks = await collect(await m.completions.create({ prompt, max_tokens: 160, temperature: 0, stream: true,
      response_format: { type: 'json_schema', json_schema: { schema: PERSON } } }));
      assert.equal(chunks.map((c) => c.choices[0].text).join(''), text);
    }
    // sampled: every reply parses (and validates), over seeds; JSON mode too
    const n = slow ? (dev === 'cpu' ? 24 : 4) : (dev === 'cpu' ? 3 : 1), schemaReplies = [];
    for (let seed = 1; seed <= n; seed++) {
      const s = await m.completions.create({ prompt, max_tokens: 200, temperature: 1, seed, response_format: { type: 'json_schema', json_schema: { schema: PERSON } } });
      assert.equal(s.choices[0].finish_reason, 'stop', `seed ${seed}: ${JSON.stringify(s.choices[0].text)}`);
      schemaReplies.push(JSON.parse(s.choices[0].text));
      const j = await m.chat.completions.create({ messages: [{ role: 'user', content: 'Tell me' }], max_tokens: 64, temperature: 1, seed,
        response_format: { type: 'json_object' } });
      if (j.choices[0].finish_reason === 'stop') JSON.parse(j.choices[0].message.content);
      else assert.equal(j.choices[0].finish_reason, 'length'); // JSON mode may nest beyond the budget
    }
    assert.deepEqual(validate(PERSON, schemaReplies), schemaReplies.map(() => ''));
    // the same seed, the same constrained text
    const again = await m.completions.create({ prompt, max_tokens: 200, temperature: 1, seed: 1, response_format: { type: 'json_schema', json_schema: { schema: PERSON } } });
    assert.deepEqual(JSON.parse(again.choices[0].text), schemaReplies[0]);
    // a GBNF grammar
    const g = await m.chat.completions.create({ messages: [{ role: 'user', content: 'Is it?' }], temperature: 1, seed: 3, max_tokens: 20,
      grammar: 'root ::= ("yes" | "no" | "maybe") " " [0-9]{2}' });
    assert.match(g.choices[0].message.content, /^(yes|no|maybe) [0-9]{2}$/);
  });

  if (dev === 'webgpu') test('webgpu: the grammar mask on the GPU: greedy ids equal the read-back path\'s, 4-byte steps, nothing created', { timeout: 300000 }, async () => {
    const m = await storiesOn(dev, lw), eng = m.engine;
    assert.equal(typeof gpu.Module._lw_wasm_model_set_mask, 'function', 'the wasm build has the GPU mask');
    const prompt = 'Once upon a time';
    const cases = [ // [constraint, check of the reply text]
      [{ kind: 'json_schema', text: JSON.stringify(PERSON) }, (t) => assert.deepEqual(validate(PERSON, [JSON.parse(t)]), [''])],
      [{ kind: 'json' }, (t) => JSON.parse(t)],
      [{ kind: 'gbnf', text: 'root ::= ("yes" | "no" | "maybe") " " [0-9]{2}' }, (t) => assert.match(t, /^(yes|no|maybe) [0-9]{2}$/)],
      [{ kind: 'gbnf', text: 'root ::= [a-z ,.]+' }, (t) => assert.match(t, /^[a-z ,.]+$/)],
    ];
    const want0 = (l) => l.reduce((b, v, i) => (v > l[b] ? i : b), 0); // the free argmax (first maximum)
    // a fresh context before each run: the prompt decoded in the same steps (the same logits bits) either way
    const run = async (constraint, onGpu) => {
      await m.completions.create({ prompt: 'x', max_tokens: 1, temperature: 0 });
      eng.gpuMask = onGpu;
      try {
        const before = eng.info();
        const r = await structuredRun(m, { mode: 'text', prompt, constraint, maxTokens: 96 });
        return { r, before, after: eng.info() };
      } finally {
        eng.gpuMask = true;
      }
    };
    for (const [constraint, check] of cases) {
      const gpuRun = await run(constraint, true), readBack = await run(constraint, false);
      const a = gpuRun.r, b = readBack.r, what = JSON.stringify(constraint).slice(0, 60);
      assert.ok(a.tokens.length > 0, what);
      assert.deepEqual(a.tokens, b.tokens, `${what}: the same greedy ids through the mask on the GPU and the read-back`);
      assert.equal(a.text, b.text);
      // every id was picked on the GPU (the masked top-k pass ran once per picked id), none on the read-back path
      assert.equal(a.grammar.gpuSteps, a.grammar.steps, what);
      assert.ok(a.grammar.steps >= a.tokens.length, what); // (+ the end-of-generation id the grammar allowed)
      assert.equal(gpuRun.after.maskedSteps - gpuRun.before.maskedSteps, a.grammar.steps, what);
      assert.equal(b.grammar.gpuSteps, 0);
      assert.equal(readBack.after.maskedSteps, readBack.before.maskedSteps);
      // nothing created while decoding (the mask's buffer, pipelines and bind groups were made at open)
      for (const k of ['buffers', 'pipelines', 'bindGroups']) assert.equal(gpuRun.after[k], gpuRun.before[k], `${what}: ${k}`);
      if (a.reason === 'eog') check(a.text);
      else check(a.text.replace(/[^a-z ,.]+$/, '')); // (only the open-ended [a-z ,.]+ reaches the budget)
      console.log(`# webgpu mask on the GPU: ${what} -> ${JSON.stringify(a.text).slice(0, 80)} (${a.tokens.length} ids, all on the GPU)`);
    }
    // the kernel: with a mask of chosen ids the GPU's id is the best of them by the logits read back (ties to
    // the lower id); with none allowed, the padding id (-1), which sends GpuModel.decode to its fallback
    const GM = eng.M, words = (eng.nVocab + 31) >> 5, mp = GM._malloc(4 * words), zeros = GM._malloc(4 * words);
    GM.HEAPU32.fill(0, zeros >> 2, (zeros >> 2) + words);
    const orig = Grammar.prototype.mask;
    try {
      m.cacheOwner = null; // the KV cache is overwritten here
      m.cached = null;
      m.pending = -1;
      const ids = eng.tokenize(prompt);
      eng.nPast = 0;
      const { logits } = await eng.decode(ids, 'logits');
      const sets = [[7], [3, 100, 250, 511], Array.from({ length: eng.nVocab >> 1 }, (_, i) => 2 * i), []];
      for (const set of sets) {
        GM.HEAPU32.fill(0, mp >> 2, (mp >> 2) + words);
        for (const i of set) GM.HEAPU32[(mp >> 2) + (i >> 5)] |= 1 << (i & 31);
        let want = -1;
        for (const i of [...set].sort((p, q) => p - q)) if (want < 0 || logits[i] > logits[want]) want = i;
        eng.nPast = 0;
        assert.equal(GM._lw_wasm_model_set_mask(eng.h, mp, words), 0);
        assert.equal(await eng.decode(ids), want, `mask of ${set.length} ids`);
      }
      eng.nPast = 0;
      assert.equal(await eng.decode(ids), want0(logits), 'the mask applies to one step only');
      // the fallback: every GPU id refused (an all-zero mask uploaded) -> the step again with its logits read
      // back and the CPU sampler's pick: the read-back path's ids
      Grammar.prototype.mask = function () { orig.call(this); this.maskPtr = zeros; return zeros; };
      const fb = await run(cases[0][0], true);
      Grammar.prototype.mask = orig;
      const rb = await run(cases[0][0], false);
      assert.deepEqual(fb.r.tokens, rb.r.tokens, 'the fallback gives the read-back path\'s ids');
      assert.equal(fb.r.grammar.gpuSteps, 0);
      assert.equal(fb.after.maskedSteps - fb.before.maskedSteps, fb.r.grammar.steps, 'the masked pass ran, its ids refused');
    } finally {
      Grammar.prototype.mask = orig;
      GM._free(mp);
      GM._free(zeros);
    }
    // sampled constrained replies draw on the GPU among the allowed ids too, and parse
    for (let seed = 1; seed <= 2; seed++) {
      const before = eng.info();
      const s = await m.completions.create({ prompt, max_tokens: 200, temperature: 1, seed, response_format: { type: 'json_schema', json_schema: { schema: PERSON } } });
      assert.equal(s.choices[0].finish_reason, 'stop');
      assert.deepEqual(validate(PERSON, [JSON.parse(s.choices[0].text)]), ['']);
      const after = eng.info();
      assert.ok(after.maskedSteps > before.maskedSteps);
      for (const k of ['buffers', 'pipelines', 'bindGroups']) assert.equal(after[k], before[k], k);
    }
  });

  test(`${dev}: the cost of a grammar per step`, { timeout: 300000 }, async () => {
    const m = await storiesOn(dev, lw);
    const n = dev === 'cpu' ? 64 : 12, prompt = 'Once upon a time', rounds = slow ? 5 : 3;
    const constraint = { kind: 'gbnf', text: 'root ::= [a-z ,.]+' }; // never complete early: n tokens either way
    const free = [], cons = [], pick = [];
    await m.generate(prompt, { maxTokens: 4 });
    await structuredRun(m, { mode: 'text', prompt, constraint, maxTokens: 4 });
    for (let i = 0; i < rounds; i++) { // alternating; per decode step of the reply
      const a = await m.generate(prompt, { maxTokens: n });
      free.push(a.genMs / Math.max(1, a.tokens.length - 1));
      const b = await structuredRun(m, { mode: 'text', prompt, constraint, maxTokens: n });
      assert.equal(b.tokens.length, n);
      cons.push(b.genMs / (b.tokens.length - 1));
      pick.push(b.grammar.ms / b.grammar.steps);
    }
    const med = (x) => x.sort((p, q) => p - q)[x.length >> 1];
    console.log(`# ${dev}: stories260K (512-token vocabulary) greedy, ms per token: ${med(free).toFixed(3)} free, ${med(cons).toFixed(3)} ` +
      `with a grammar (the grammar's pick: ${med(pick).toFixed(3)} ms; medians of ${rounds})`);
  });

  test(`${dev}: embeddings.create equals llamaweb embed (stories260K)`, { timeout: 300000 }, async () => {
    const m = await storiesOn(dev, lw);
    const texts = ['Once upon a time', 'The little dog ran to the park.'];
    for (const pooling of dev === 'cpu' || slow ? ['mean', 'last', 'cls'] : ['mean', 'cls']) {
      const r = await m.embeddings.create({ input: texts, pooling });
      assert.equal(r.object, 'list');
      assert.equal(r.data.length, 2);
      const ref = JSON.parse(execFileSync(cli, ['embed', '-m', stories, ...texts.flatMap((t) => ['-p', t]), '--pooling', pooling, '--normalize', '-t', '1'],
        { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }));
      assert.equal(r.usage.prompt_tokens, ref.data.reduce((a, d) => a + d.n_tokens, 0));
      for (let i = 0; i < texts.length; i++) {
        const a = r.data[i].embedding, b = ref.data[i].embedding;
        assert.equal(r.data[i].object, 'embedding');
        assert.equal(r.data[i].index, i);
        assert.equal(a.length, b.length);
        let dot = 0, na = 0, nb = 0, diff = 0;
        for (let k = 0; k < a.length; k++) {
          dot += a[k] * b[k]; na += a[k] * a[k]; nb += b[k] * b[k];
          diff = Math.max(diff, Math.abs(a[k] - b[k]));
        }
        const cos = dot / Math.sqrt(na * nb);
        if (i === 0) console.log(`# ${dev} ${pooling}: cosine ${cos.toFixed(9)}, max |diff| ${diff.toExponential(2)}`);
        // the CPU engine: llamaweb embed's own arithmetic; WebGPU: one-token steps, other summation orders
        assert.ok(cos >= 0.9999 && diff <= (dev === 'cpu' ? 1e-4 : 1e-3), `${pooling} input ${i}: cosine ${cos}, max diff ${diff}`);
      }
    }
    const one = await m.embeddings.create({ input: 'Once upon a time', encoding_format: 'base64', normalize: -1 });
    const bytes = Buffer.from(one.data[0].embedding, 'base64');
    assert.equal(bytes.length, 4 * m.info.n_embd);
    await assert.rejects(m.embeddings.create({ input: [] }), (e) => e instanceof LlamawebError && e.code === 'BAD_INPUT');
    await assert.rejects(m.embeddings.create({ input: 'x', pooling: 'max' }), (e) => e.code === 'BAD_INPUT');
    await assert.rejects(m.embeddings.create({ input: 'x', dimensions: 3 }), (e) => e.code === 'BAD_INPUT');
    // generation after embeddings is a fresh context's
    const r1 = await m.completions.create({ prompt: 'Once upon a time', max_tokens: 8, temperature: 0 });
    assert.equal(r1.choices[0].text, cliRun(stories, 'Once upon a time', 8, ['--temp', '0']).slice(0, r1.choices[0].text.length));
  });

  test(`${dev}: typed errors for bad structure requests`, { timeout: 120000 }, async () => {
    const m = await storiesOn(dev, lw);
    const bad = (req) => assert.rejects(m.chat.completions.create({ messages: [{ role: 'user', content: 'x' }], max_tokens: 4, ...req }),
      (e) => e instanceof LlamawebError && e.code === 'BAD_INPUT', JSON.stringify(req));
    await bad({ response_format: { type: 'json_schema', json_schema: { schema: { type: 'object', properties: { a: { $ref: '#/nowhere' } } } } } });
    await bad({ response_format: { type: 'json_schema', json_schema: { schema: { type: 'strange' } } } });
    await bad({ response_format: { type: 'json_schema' } });
    await bad({ response_format: { type: 'xml' } });
    await bad({ grammar: 'root ::= undefined-rule' });
    await bad({ grammar: 'root ::= "a" | ' + '('.repeat(5000) });
    await bad({ grammar: 'root ::= "a"', response_format: { type: 'json_object' } });
    await bad({ tools: [WEATHER], tool_choice: { type: 'function', function: { name: 'nope' } } });
    await bad({ tools: [{ type: 'function', function: { name: 'bad name' } }] });
    await bad({ tool_choice: 'required' });
    // the model stays usable
    const r = await m.completions.create({ prompt: 'Once', max_tokens: 2, temperature: 0, response_format: { type: 'json_object' } });
    assert.ok(r.choices[0].text.length > 0);
  });
}

// A ChatML template that shows tools and tool calls as Qwen2.5's does (the same text for the parts it has).
const TOOLS_TEMPLATE = `{%- if tools %}<|im_start|>system
{% if messages[0]['role'] == 'system' %}{{ messages[0]['content'] }}{% else %}You are a helpful assistant.{% endif %}

# Tools

You may call one or more functions to assist with the user query.

You are provided with function signatures within <tools></tools> XML tags:
<tools>{% for tool in tools %}
{{ tool | tojson }}{% endfor %}
</tools>

For each function call, return a json object with function name and arguments within <tool_call></tool_call> XML tags:
<tool_call>
{"name": <function-name>, "arguments": <args-json-object>}
</tool_call><|im_end|>
{% elif messages[0]['role'] == 'system' %}<|im_start|>system
{{ messages[0]['content'] }}<|im_end|>
{% endif %}{%- for message in messages %}{%- if message.role == 'user' or (message.role == 'system' and not loop.first) %}<|im_start|>{{ message.role }}
{{ message.content }}<|im_end|>
{% elif message.role == 'assistant' %}<|im_start|>assistant{% if message.content %}
{{ message.content }}{% endif %}{% for tool_call in message.tool_calls or [] %}{% if tool_call.function is defined %}{% set tool_call = tool_call.function %}{% endif %}
<tool_call>
{"name": "{{ tool_call.name }}", "arguments": {{ tool_call.arguments | tojson }}}
</tool_call>{% endfor %}<|im_end|>
{% elif message.role == 'tool' %}<|im_start|>user
<tool_response>
{{ message.content }}
</tool_response><|im_end|>
{% endif %}{%- endfor %}{%- if add_generation_prompt %}<|im_start|>assistant
{% endif %}`;

for (const [dev, lw] of engines) {
  test(`${dev}: tools: tool_calls in OpenAI's shape, streamed deltas, tool results`, { timeout: 300000 }, async () => {
    const t = path.join(tmp, 'tools.jinja'), file = path.join(tmp, 'tools.gguf');
    writeFileSync(t, TOOLS_TEMPLATE);
    execFileSync(cli, ['synth', '--preset', 'tiny', '--type', 'f32', '--vocab', 'builtin', '--chat-template', t, '-o', file], { stdio: 'ignore' });
    const m = await lw.open(bytesSource(readFileSync(file)), { nCtx: 2048, device: dev });
    try {
      const messages = [{ role: 'user', content: 'Weather in Oslo?' }];
      const prompt = await m.renderChat([{ role: 'user', content: 'x' }]); // without tools: no tool section
      assert.ok(!prompt.includes('<tools>'));
      const n = slow ? (dev === 'cpu' ? 8 : 2) : 1;
      for (let seed = 1; seed <= n; seed++) { // parallel calls too, where the budget lets a second one finish
        const r = await m.chat.completions.create({ messages, tools: [WEATHER, TIME], tool_choice: 'required', temperature: 1, seed,
          max_tokens: 400, parallel_tool_calls: seed % 2 === 0 });
        const c = r.choices[0];
        assert.equal(c.finish_reason, 'tool_calls', JSON.stringify(c));
        assert.ok(c.message.tool_calls.length >= 1);
        for (const call of c.message.tool_calls) {
          assert.match(call.id, /^call_/);
          assert.equal(call.type, 'function');
          assert.ok(['get_weather', 'get_time'].includes(call.function.name));
          assert.equal(typeof call.function.arguments, 'string');
          assert.deepEqual(validate(paramsOf(call.function.name), [JSON.parse(call.function.arguments)]), ['']);
        }
      }
      if (dev !== 'cpu' && !slow) return; // the rest is the same JS over either engine's constrained picks
      // one named function, one call
      const one = await m.chat.completions.create({ messages, tools: [WEATHER, TIME], tool_choice: { type: 'function', function: { name: 'get_time' } },
        parallel_tool_calls: false, temperature: 1, seed: 7, max_tokens: 200 });
      assert.equal(one.choices[0].message.tool_calls.length, 1);
      assert.equal(one.choices[0].message.tool_calls[0].function.name, 'get_time');
      // streamed: the deltas' calls equal the result's
      const req = { messages, tools: [WEATHER], tool_choice: 'required', parallel_tool_calls: false, temperature: 1, seed: 2, max_tokens: 200 };
      const full = await m.chat.completions.create(req);
      // a fresh context again (a cache holding the prompt would decode only its end: other last bits, and at
      // temperature 1 another draw where a probability sits at a boundary)
      await m.completions.create({ prompt: 'x', max_tokens: 1 });
      const chunks = await collect(await m.chat.completions.create({ ...req, stream: true }));
      const deltas = chunks.flatMap((k) => k.choices[0].delta.tool_calls || []);
      // OpenAI's stream shape: per call a header (index, id, type, name) and then the arguments in pieces
      // as they were generated, joining to the result's arguments
      const joined = [];
      for (const d of deltas) {
        if (d.id) joined[d.index] = { index: d.index, name: d.function.name, arguments: d.function.arguments, type: d.type };
        else joined[d.index].arguments += d.function.arguments;
      }
      assert.deepEqual(joined.map((d) => [d.index, d.type, d.name, d.arguments]),
        full.choices[0].message.tool_calls.map((d, i) => [i, 'function', d.function.name, d.function.arguments]));
      assert.ok(deltas.length > joined.length + 1, `the arguments streamed in pieces (${deltas.length} deltas)`);
      assert.equal(chunks.at(-1).choices[0].finish_reason, 'tool_calls');
      assert.equal(chunks[0].choices[0].delta.role, 'assistant');
      // a conversation ending with the tool's result: rendered with the call and the result; a reply (auto)
      const call = full.choices[0].message.tool_calls[0];
      const follow = [...messages, { role: 'assistant', content: null, tool_calls: [call] },
        { role: 'tool', tool_call_id: call.id, content: '{"temp": 21}' }];
      const r2 = await m.chat.completions.create({ messages: follow, tools: [WEATHER], max_tokens: 8, temperature: 0 });
      assert.ok(['stop', 'length', 'tool_calls'].includes(r2.choices[0].finish_reason));
      assert.ok(r2.usage.prompt_tokens > full.usage.prompt_tokens, 'the call and the result are in the prompt');
    } finally {
      m.free();
    }
  });
}

test('tools grammar text: one rule set per tool, the primitives once', { skip: skip || false }, () => {
  const g = grammarText(M, { kind: 'tools', text: JSON.stringify([WEATHER, TIME]), format: 'hermes' });
  assert.match(g, /^root ::= "<tool_call>\\n" call/m);
  assert.equal((g.match(/^space ::=/gm) || []).length, 1);
  assert.throws(() => grammarText(M, { kind: 'json_schema', text: '{"type": 5}' }), (e) => e.code === 'BAD_INPUT');
});
