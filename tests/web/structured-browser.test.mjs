// Structured output in headless Chromium through Llamaweb.loadInWorker() (the worker's 'structured' and
// 'embed' ops, web/llamaweb-worker.mjs) and load() on the page, CPU engine: a tool model's
// chat.completions.create with tool_choice 'required' answers OpenAI-shaped tool_calls (streamed deltas: the
// call's header, then its arguments in pieces that join to the result's), a json_schema reply on stories260K equals the native CLI's constrained greedy text, and
// embeddings.create equals `llamaweb embed`; a bad schema rejects with BAD_INPUT across the worker.
// Run: LW_WASM_DIR=... LW_CLI=build-NAME/llamaweb node --test tests/web/structured-browser.test.mjs
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, rmSync, writeFileSync, copyFileSync } from 'node:fs';
import { execFileSync } from 'node:child_process';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { repoRoot } from '../../web/lw-node.mjs';
import { startServer } from '../../web/serve.mjs';
import { launchChromium, chromiumMissing } from './chromium.mjs';

const root = repoRoot();
const wasmDir = path.resolve(root, process.env.LW_WASM_DIR || 'build/wasm');
const shared = process.env.LW_SHARED || path.resolve(root, '../shared');
const stories = path.join(shared, 'models/stories260K.gguf');
const cli = [process.env.LW_CLI, ...['build/release', 'build', 'build-model', 'build-demo'].map((d) => path.join(root, d, 'llamaweb'))]
  .find((p) => p && existsSync(p));
const skip = chromiumMissing() || (!existsSync(path.join(wasmDir, 'llamaweb-wasm.wasm')) ? `${wasmDir} not built (scripts/build-wasm.sh)` :
  !existsSync(stories) ? `no ${stories} (the shared test models)` : !cli ? 'no native llamaweb CLI (scripts/build.sh, or LW_CLI)' : false);
if (skip) console.log('SKIP: ' + skip);

const PERSON = { type: 'object', properties: { name: { type: 'string', maxLength: 8 }, kind: { enum: ['cat', 'dog', 'girl'] } }, required: ['name', 'kind'] };
const WEATHER = { type: 'function', function: { name: 'get_weather', parameters: { type: 'object',
  properties: { city: { type: 'string', maxLength: 8 }, unit: { enum: ['c', 'f'] } }, required: ['city', 'unit'] } } };
// a ChatML template with Qwen's tool section (short)
const TEMPLATE = '{% if tools %}<|im_start|>system\n<tools>{% for t in tools %}\n{{ t | tojson }}{% endfor %}\n</tools><|im_end|>\n{% endif %}' +
  '{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}';

test('headless Chromium: tool_calls, json_schema and embeddings in the worker and on the page', { skip, timeout: 300000 }, async () => {
  const dir = mkdtempSync(path.join(process.env.LW_TMP || tmpdir(), 'lw-structured-browser-'));
  after(() => rmSync(dir, { recursive: true, force: true }));
  copyFileSync(stories, path.join(dir, 'stories260K.gguf'));
  writeFileSync(path.join(dir, 'tools.jinja'), TEMPLATE);
  execFileSync(cli, ['synth', '--preset', 'tiny', '--type', 'f32', '--vocab', 'builtin', '--chat-template', path.join(dir, 'tools.jinja'),
    '-o', path.join(dir, 'tools.gguf')], { stdio: 'ignore' });
  const prompt = 'Once upon a time';
  writeFileSync(path.join(dir, 'person.json'), JSON.stringify(PERSON));
  const out = execFileSync(cli, ['run', '-m', stories, '-p', prompt, '-n', '120', '-t', '1', '--temp', '0', '--json-schema', path.join(dir, 'person.json')],
    { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] });
  const native = out.slice(0, out.lastIndexOf('\nids: ')).slice(out.indexOf(prompt) + prompt.length);
  const embedRef = JSON.parse(execFileSync(cli, ['embed', '-m', stories, '-p', prompt, '--pooling', 'mean', '--normalize', '-t', '1'],
    { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] })).data[0].embedding;

  const srv = await startServer({ port: 0, wasmDir, modelsDir: dir });
  const browser = await launchChromium();
  try {
    const page = await browser.newPage(`http://127.0.0.1:${srv.port}/demo/`);
    const got = await page.evaluate(`(async () => {
      const { Llamaweb } = await import('/llamaweb.mjs');
      const res = {};
      for (const where of ['worker', 'page']) {
        const lw = where === 'worker' ? await Llamaweb.loadInWorker({ device: 'cpu' }) : await Llamaweb.load({ device: 'cpu' });
        const m = await lw.open('/models/tools.gguf', { cache: false, nCtx: 1024, threads: 1 });
        const req = { messages: [{ role: 'user', content: 'Weather?' }], tools: [${JSON.stringify(WEATHER)}], tool_choice: 'required',
          parallel_tool_calls: false, temperature: 1, seed: 5, max_tokens: 300 };
        const r = await m.chat.completions.create(req);
        // a fresh context again (a cache holding the prompt would decode only its end: other last bits, and
        // at temperature 1 another draw where a probability sits at a boundary)
        await m.completions.create({ prompt: 'x', max_tokens: 1 });
        const deltas = [];
        let last = null;
        for await (const c of await m.chat.completions.create({ ...req, stream: true })) {
          for (const d of c.choices[0].delta.tool_calls || []) deltas.push(d);
          last = c;
        }
        m.free();
        const s = await lw.open('/models/stories260K.gguf', { cache: false, nCtx: 256, threads: 1 });
        const j = await s.completions.create({ prompt: ${JSON.stringify(prompt)}, max_tokens: 120, temperature: 0,
          response_format: { type: 'json_schema', json_schema: { schema: ${JSON.stringify(PERSON)} } } });
        const e = await s.embeddings.create({ input: ${JSON.stringify(prompt)}, pooling: 'mean' });
        let badCode = null;
        try { await s.chat.completions.create({ messages: [{ role: 'user', content: 'x' }], response_format: { type: 'json_schema', json_schema: { schema: { type: 'nope' } } } }); }
        catch (err) { badCode = err.code; }
        s.free();
        if (where === 'worker') lw.terminate();
        res[where] = { r, deltas, finish: last.choices[0].finish_reason, j, e, badCode };
      }
      return res;
    })()`);
    for (const where of ['worker', 'page']) {
      const g = got[where];
      const c = g.r.choices[0];
      assert.equal(c.finish_reason, 'tool_calls', `${where}: ${JSON.stringify(c)}`);
      assert.equal(c.message.tool_calls.length, 1);
      const call = c.message.tool_calls[0];
      assert.match(call.id, /^call_/);
      assert.equal(call.type, 'function');
      assert.equal(call.function.name, 'get_weather');
      const args = JSON.parse(call.function.arguments);
      assert.ok(typeof args.city === 'string' && args.city.length <= 8 && ['c', 'f'].includes(args.unit), call.function.arguments);
      // OpenAI's stream shape: the call's header (its id, the name), then its arguments in pieces
      assert.ok(g.deltas.length > 2 && /^call_/.test(g.deltas[0].id) && g.deltas.slice(1).every((d) => d.index === 0 && d.id === undefined),
        `${where}: ${JSON.stringify(g.deltas.slice(0, 3))}`);
      assert.deepEqual([g.deltas[0].index, g.deltas[0].function.name, g.deltas.map((d) => d.function.arguments).join('')],
        [0, 'get_weather', call.function.arguments]);
      assert.equal(g.finish, 'tool_calls');
      assert.equal(g.j.choices[0].text, native, `${where}: the native CLI's constrained greedy text`);
      const v = g.e.data[0].embedding;
      assert.equal(v.length, embedRef.length);
      assert.ok(v.every((x, k) => Math.abs(x - embedRef[k]) <= 1e-4), `${where}: embeddings equal llamaweb embed's`);
      assert.equal(g.badCode, 'BAD_INPUT');
      console.log(`# ${where}: tool call ${call.function.arguments}; json ${g.j.choices[0].text}`);
    }
  } finally {
    await browser.close();
    srv.server.close();
  }
});
