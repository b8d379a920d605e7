// Streamed tool calls of the OpenAI-shaped API (web/lw-openai.mjs toolCallStream): replies in the Hermes,
// Llama 3 and Mistral conventions (and 'auto'), fed whole, one character at a time and in random pieces,
// give OpenAI's stream deltas (content before the first call; per call a header {index, id, type, function:
// {name, arguments: ''}} and then argument pieces) whose calls, joined per index, equal the C parser's
// (src/grammar/tool-call.c through the wasm build: names and arguments' text), with the same ids in a call's
// header and its final object; the arguments stream while they are generated (pieces before the end) where
// the reply has the parser's usual layout (name first, arguments an object); elsewhere (arguments first, as a
// JSON string, text between calls) the calls come whole at the end and still equal the parser's. Replies
// without calls stream as content whole; a call cut off keeps what streamed and finish gives no more.
// Run: LW_WASM_DIR=... node --test tests/web/tool-stream.test.mjs
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { loadModule } from '../../web/lw-node.mjs';
import { toolCallStream } from '../../web/lw-openai.mjs';
import { parseToolCalls } from '../../web/lw-structured.mjs';

const M = await loadModule();
const skip = !M ? 'the wasm build is missing (scripts/build-wasm.sh, LW_WASM_DIR)' :
  typeof M._lw_wasm_tool_calls_parse !== 'function' ? 'this wasm build has no tool-call parser' : false;
if (skip) console.log('SKIP: ' + skip);

// [format, reply, streams: whether every call's arguments stream before the end, extra: a call streams that
// the parser refuses (it cannot be taken back: the parsed calls must come after it, in order)]
const W = '{"name": "get_weather", "arguments": {"city": "Oslo", "unit": "c"}}';
const CASES = [
  ['hermes', `<tool_call>\n${W}\n</tool_call>`, true],
  ['hermes', `Let me check.\n<tool_call>\n${W}\n</tool_call>\n<tool_call>\n{"name":"add","arguments":{"a":[1,{"b":null}],"s":"x}\\"]{"}}\n</tool_call>`, true],
  ['hermes', '<tool_call>{"name": "f", "arguments": {"s": "</tool_call>", "t": "\\u00e9\\n"}}</tool_call>', true],
  ['hermes', '<tool_call>\n{"name": "ping"}\n</tool_call>', true],
  ['hermes', '<tool_call>\n{"id": 7, "x": [1, {"y": "}"}], "name": "f", "z": true, "arguments": {"k": -1.5e3}}\n</tool_call>', true],
  ['hermes', '<tool_call>{"arguments": {"a": 1}, "name": "late"}</tool_call>', false],
  ['hermes', '<tool_call>{"name": "f", "arguments": "{\\"x\\": 1}"}</tool_call>', false],
  ['hermes', `<tool_call>\n${W}\n</tool_call>\nthen\n<tool_call>\n{"name": "g", "arguments": {}}\n</tool_call> done`, false],
  ['hermes', `<tool_call>\n${W}`, true], // the closing tag never came: the parser takes it
  ['hermes', 'No calls here, just text about <tools>.', true],
  ['hermes', '<tool_call> not json </tool_call> after', true],
  ['hermes', '<tool_call>{"name": "f", "arguments": {"a": 1}} junk</tool_call>\n<tool_call>{"name": "g", "arguments": {}}</tool_call>', false, true],
  ['hermes', '<tool_call>{"name": "f", "arguments": {}} x</tool_call><tool_call>{"name": "f", "arguments": {}}</tool_call>', false],
  ['llama3', '{"name": "get_weather", "parameters": {"city": "Oslo"}}', true],
  ['llama3', '<|python_tag|>{"name": "a", "parameters": {"x": 1}}; {"name": "b", "parameters": {}}', true],
  ['llama3', 'Plain {text}', true],
  ['mistral', '[TOOL_CALLS][{"name": "a", "arguments": {"x": "]"}}, {"name": "b", "arguments": {"y": [2]}}]', true],
  ['mistral', '[TOOL_CALLS] [ {"name": "a", "arguments": {}} ]', true],
  ['auto', `<tool_call>\n${W}\n</tool_call>`, true],
  ['auto', '[TOOL_CALLS][{"name": "a", "arguments": {"x": 1}}]', true],
  ['auto', '  {"name": "a", "arguments": {"x": 1}}', true],
  ['auto', 'Sure: nothing to call.', true],
];

// A seeded generator (xorshift) for the random pieces.
function rng(seed) {
  let x = seed >>> 0 || 1;
  return () => { x ^= x << 13; x >>>= 0; x ^= x >>> 17; x ^= x << 5; x >>>= 0; return x / 2 ** 32; };
}

// The pieces of text: whole, per character (code points), or random lengths 1..8.
function pieces(text, how, seed) {
  const cps = Array.from(text);
  if (how === 'whole') return [text];
  if (how === 'chars') return cps;
  const r = rng(seed), out = [];
  for (let i = 0; i < cps.length;) {
    const n = 1 + Math.floor(r() * 8);
    out.push(cps.slice(i, i + n).join(''));
    i += n;
  }
  return out;
}

// Streams reply through toolCallStream as web/lw-openai.mjs does (pushes, then finish with the parse) and
// gathers the deltas: content, calls per index, how many argument pieces came before finish.
function stream(format, reply, how, seed) {
  const parsed = parseToolCalls(M, reply, format);
  const final = parsed.calls.map((c, i) => ({ id: `call_final_${i}`, type: 'function', function: { name: c.function.name, arguments: c.function.arguments } }));
  const s = toolCallStream(format);
  const got = { content: '', calls: [], early: 0, headers: 0 };
  const take = (d, early) => {
    if (d.content !== undefined) { got.content += d.content; return; }
    assert.equal(d.tool_calls.length, 1);
    const tc = d.tool_calls[0];
    assert.ok(Number.isInteger(tc.index) && tc.index >= 0);
    if (tc.id !== undefined) {
      assert.equal(got.calls[tc.index], undefined, 'one header per call');
      assert.equal(tc.type, 'function');
      assert.match(tc.id, /^call_/);
      got.calls[tc.index] = { id: tc.id, name: tc.function.name, arguments: tc.function.arguments };
      got.headers++;
    } else {
      assert.ok(got.calls[tc.index], 'argument pieces follow their call\'s header');
      assert.equal(tc.function.name, undefined);
      got.calls[tc.index].arguments += tc.function.arguments;
    }
    if (early && tc.function.arguments) got.early++;
  };
  for (const p of pieces(reply, how, seed)) for (const d of s.push(p)) take(d, true);
  for (const d of s.finish(final.length ? final : null, parsed.content)) take(d, false);
  return { got, final, parsed };
}

test('streamed tool-call deltas join to the C parser\'s calls, in every convention and any pieces', { skip }, () => {
  let early = 0, n = 0;
  for (const [format, reply, streams, extra] of CASES) {
    for (const [how, seed] of [['whole', 0], ['chars', 0], ['random', 1], ['random', 2], ['random', 3]]) {
      const label = `${format} ${how}/${seed}: ${JSON.stringify(reply)}`;
      const { got, final, parsed } = stream(format, reply, how, seed);
      const want = final.map((c) => [c.id, c.function.name, c.function.arguments]);
      if (extra) { // the parsed calls, in order, among the streamed ones, and at least one more
        const have = got.calls.map((c) => [c.id, c.name, c.arguments]);
        let j = 0;
        for (const h of have) if (j < want.length && JSON.stringify(h) === JSON.stringify(want[j])) j++;
        assert.ok(j === want.length && have.length > want.length, `${label}: ${JSON.stringify(have)}`);
      } else {
        // a call's id is the one its header carried (the final result uses it too)
        assert.deepEqual(got.calls.map((c) => [c.id, c.name, c.arguments]), want, label);
      }
      const squash = (t) => t.replace(/\s+/g, ' ').trim();
      if (final.length) assert.equal(squash(got.content), squash(parsed.content), label);
      else assert.equal(got.content, reply, label); // no calls: the reply is content, all of it
      if (streams && final.length && how === 'chars') {
        // the arguments came while the reply was generated: every call's header before the end, and its
        // arguments' text up to the last character before finish
        assert.equal(got.headers, final.length, label);
        assert.ok(got.early >= final.filter((c) => c.function.arguments.length > 2).length, label);
      }
      early += got.early;
      n++;
    }
  }
  console.log(`${n} streams of ${CASES.length} replies; ${early} argument pieces streamed before the end`);
});

test('a call cut off keeps what streamed; a streamed call\'s final object has its id', { skip }, () => {
  const s = toolCallStream('hermes');
  const out = [];
  for (const p of pieces('<tool_call>\n{"name": "f", "arguments": {"a": [1, 2', 'chars')) out.push(...s.push(p));
  const tc = out.filter((d) => d.tool_calls).map((d) => d.tool_calls[0]);
  assert.equal(tc[0].function.name, 'f');
  assert.equal(tc.map((t) => t.function.arguments).join(''), '{"a": [1, 2');
  assert.deepEqual(s.finish(null, ''), []); // no content repeated, no calls invented
  assert.ok(s.streamed());
  // completed: finish adds the rest and the final object gets the streamed id
  const s2 = toolCallStream('hermes');
  const d2 = [...s2.push('<tool_call>\n{"name": "f", "arguments": {"a"'), ...s2.push(': 1}}\n')];
  const id = d2.find((d) => d.tool_calls && d.tool_calls[0].id).tool_calls[0].id;
  const final = [{ id: 'call_x', type: 'function', function: { name: 'f', arguments: '{"a": 1}' } }];
  assert.deepEqual(s2.finish(final, ''), []); // all of it streamed already
  assert.equal(final[0].id, id);
});
