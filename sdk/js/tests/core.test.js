// Unit tests of the SDK core on plain node, with the host imports stubbed:
//
//   node --test sdk/js/tests/
import { test } from 'node:test';
import assert from 'node:assert/strict';
import {
  createSdk,
  ToolError,
  ComponentError,
  Content,
  json,
  text,
  binary,
  contents,
  describeFailure,
  isOutOfMemory,
} from '../core.js';

function stubHost(config = {}) {
  const calls = { logs: [], progress: [] };
  return {
    calls,
    log: (level, message) => calls.logs.push([level, message]),
    reportProgress: (p) => calls.progress.push(p),
    config: (key) => config[key],
  };
}

const OBJ = { type: 'object', properties: {}, additionalProperties: false };

/** Run a tool through the export: {ok, content} or {ok: false, kind, message}. */
async function run(sdk, name, input = {}) {
  try {
    const content = await sdk.toolkit.call(name, typeof input === 'string' ? input : JSON.stringify(input));
    return { ok: true, content };
  } catch (e) {
    assert.ok(e instanceof ComponentError, `expected a ComponentError, got ${e}`);
    assert.ok(Object.prototype.hasOwnProperty.call(e, 'payload'), 'payload is an own property');
    return { ok: false, kind: e.payload.tag, message: e.payload.val };
  }
}

test('listTools describes registered tools in order', () => {
  const sdk = createSdk(stubHost());
  const schema = {
    type: 'object',
    properties: { a: { type: 'integer', description: 'A.' } },
    required: ['a'],
  };
  const fn = ({ a }) => a;
  assert.equal(sdk.tool({ name: 'first', description: '  Does a thing.  ', input: schema }, fn), fn);
  sdk.tool({ name: 'second-2_x', description: 'Other.', output: { type: 'object' } }, () => json({}));
  const tools = sdk.toolkit.listTools();
  assert.deepEqual(tools.map((t) => t.name), ['first', 'second-2_x']);
  assert.equal(tools[0].description, 'Does a thing.');
  assert.deepEqual(JSON.parse(tools[0].inputSchema), schema);
  assert.equal(tools[0].outputSchema, undefined);
  assert.deepEqual(JSON.parse(tools[1].inputSchema), OBJ);
  assert.deepEqual(JSON.parse(tools[1].outputSchema), { type: 'object' });
  for (const t of tools) assert.deepEqual(Object.keys(t).sort(), ['description', 'inputSchema', 'name', 'outputSchema']);
});

test('tool() refuses bad names, duplicates, schemas and specs', () => {
  const sdk = createSdk(stubHost());
  const ok = { description: 'd', input: OBJ };
  for (const name of ['', 'a b', 'a.b', 'é', 'x'.repeat(65), 12, undefined]) {
    assert.throws(() => sdk.tool({ ...ok, name }, () => 1), /must match/, String(name));
  }
  sdk.tool({ ...ok, name: 'dup' }, () => 1);
  assert.throws(() => sdk.tool({ ...ok, name: 'dup' }, () => 1), /two tools are named `dup`/);
  assert.throws(() => sdk.tool({ name: 'a', description: 'd', input: { type: 'string' } }, () => 1), /"type": "object"/);
  assert.throws(() => sdk.tool({ name: 'a', description: 'd', input: { properties: {} } }, () => 1), /"type": "object"/);
  assert.throws(() => sdk.tool({ name: 'a', description: 'd', input: [] }, () => 1), /JSON Schema object/);
  assert.throws(() => sdk.tool({ name: 'a', description: 'd', input: 'x' }, () => 1), /JSON Schema object/);
  assert.throws(() => sdk.tool({ name: 'a', description: ' ', input: OBJ }, () => 1), /description/);
  assert.throws(() => sdk.tool({ name: 'a', input: OBJ }, () => 1), /description/);
  assert.throws(() => sdk.tool({ name: 'a', description: 'd', inputs: OBJ }, () => 1), /unknown key/);
  assert.throws(() => sdk.tool({ name: 'a', description: 'd' }), /function/);
  assert.throws(() => sdk.tool({ name: 'a', description: 'd', output: 'x' }, () => 1), /output/);
  assert.throws(() => sdk.tool('a', () => 1), /spec must be an object/);
  const cyclic = { type: 'object' };
  cyclic.self = cyclic;
  assert.throws(() => sdk.tool({ name: 'a', description: 'd', input: cyclic }, () => 1), /not JSON/);
  assert.deepEqual(sdk.tools().map((t) => t.name), ['dup']);
});

test('results map to content items', async () => {
  const sdk = createSdk(stubHost());
  const bytes = new Uint8Array([1, 2, 3]);
  const cases = {
    str: ['hello', [{ tag: 'text', val: 'hello' }]],
    json: [json({ a: [1, 'x', null] }), [{ tag: 'json', val: '{"a":[1,"x",null]}' }]],
    bare_obj: [{ b: true }, [{ tag: 'json', val: '{"b":true}' }]],
    bare_num: [3.5, [{ tag: 'json', val: '3.5' }]],
    bare_array: [['a', 'b'], [{ tag: 'json', val: '["a","b"]' }]],
    none: [undefined, []],
    nul: [null, []],
    bin: [binary('image/png', bytes, 'a.png'), [{ tag: 'binary', val: { mediaType: 'image/png', data: bytes, name: 'a.png' } }]],
    bare_bytes: [bytes, [{ tag: 'binary', val: { mediaType: 'application/octet-stream', data: bytes, name: undefined } }]],
    mixed: [
      [json(1), 'two', text('three'), { four: 4 }],
      [
        { tag: 'json', val: '1' },
        { tag: 'text', val: 'two' },
        { tag: 'text', val: 'three' },
        { tag: 'json', val: '{"four":4}' },
      ],
    ],
  };
  for (const [name, [value]] of Object.entries(cases)) {
    sdk.tool({ name, description: 'd', input: OBJ }, () => value);
    sdk.tool({ name: `${name}_async`, description: 'd', input: OBJ }, async () => value);
  }
  for (const [name, [, expected]] of Object.entries(cases)) {
    for (const n of [name, `${name}_async`]) {
      const r = await run(sdk, n);
      assert.ok(r.ok, `${n}: ${r.message}`);
      assert.deepEqual(r.content.map((c) => ({ tag: c.tag, val: c.val })), expected, n);
      for (const c of r.content) assert.ok(c instanceof Content);
    }
  }
});

test('a sync tool returns a list, not a promise', () => {
  const sdk = createSdk(stubHost());
  sdk.tool({ name: 't', description: 'd' }, () => 'x');
  const r = sdk.toolkit.call('t', '{}');
  assert.ok(Array.isArray(r));
});

test('binary() takes bytes in several forms and checks them', () => {
  assert.deepEqual([...binary('a/b', [0, 255]).val.data], [0, 255]);
  assert.deepEqual([...binary('a/b', new Uint16Array([1]).buffer).val.data], [1, 0]);
  assert.deepEqual([...binary('a/b', new DataView(new Uint8Array([7, 8, 9]).buffer, 1)).val.data], [8, 9]);
  assert.deepEqual([...binary('text/plain', 'hé').val.data], [104, 195, 169]);
  assert.throws(() => binary('a/b', [256]), /0-255/);
  assert.throws(() => binary('a/b', {}), /Uint8Array/);
  assert.throws(() => binary('png', []), /media type/);
  assert.equal(binary('a/b', []).val.name, undefined);
});

test('results that are not JSON fail the call', async () => {
  const sdk = createSdk(stubHost());
  const cyclic = {};
  cyclic.self = cyclic;
  const bad = { nan: { x: NaN }, inf: [Infinity], big: 10n, cyclic, fn: () => 1 };
  for (const [name, value] of Object.entries(bad)) {
    sdk.tool({ name, description: 'd', input: OBJ }, () => json(value));
  }
  for (const name of Object.keys(bad)) {
    const r = await run(sdk, name);
    assert.equal(r.kind, 'failed', name);
    assert.match(r.message, /the result is not valid JSON/, name);
  }
});

test('the input: parsed, defaults filled in, required checked', async () => {
  const sdk = createSdk(stubHost());
  let seen;
  sdk.tool(
    {
      name: 't',
      description: 'd',
      input: {
        type: 'object',
        properties: { a: { type: 'string' }, n: { type: 'integer', default: 10 }, l: { type: 'array', default: [1] } },
        required: ['a'],
      },
    },
    (input) => {
      seen = input;
      input.l.push(2); // defaults are copies
      return 'ok';
    },
  );
  assert.ok((await run(sdk, 't', { a: 'x' })).ok);
  assert.deepEqual(seen, { a: 'x', n: 10, l: [1, 2] });
  assert.ok((await run(sdk, 't', { a: 'x' })).ok);
  assert.deepEqual(seen.l, [1, 2]);
  assert.ok((await run(sdk, 't', { a: 'y', n: 3 })).ok);
  assert.equal(seen.n, 3);
  assert.deepEqual(await run(sdk, 't', {}), { ok: false, kind: 'invalid-input', message: 'missing required parameter `a`' });
  assert.equal((await run(sdk, 't', 'not json')).kind, 'invalid-input');
  assert.match((await run(sdk, 't', '[1]')).message, /must be a JSON object, not an array/);
  assert.match((await run(sdk, 't', 'null')).message, /not null/);
});

test('unknown tools are invalid input', async () => {
  const sdk = createSdk(stubHost());
  assert.deepEqual(await run(sdk, 'nope'), { ok: false, kind: 'invalid-input', message: 'this plugin has no tool named `nope`' });
});

test('errors: typed, thrown Errors, non-Error values, rejections', async () => {
  const sdk = createSdk(stubHost());
  function inner() {
    throw new RangeError('deep trouble');
  }
  const tools = {
    invalid: () => {
      throw ToolError.invalidInput('bad input');
    },
    failed: () => {
      throw ToolError.failed('it broke');
    },
    plain: () => inner(),
    async_plain: async () => {
      await null;
      throw new Error('later');
    },
    async_typed: async () => {
      throw ToolError.invalidInput('async bad');
    },
    number: () => {
      throw 42;
    },
    string: () => {
      throw 'just a string';
    },
    object: () => {
      throw { code: 7 };
    },
    undef: () => {
      throw undefined;
    },
    cause: () => {
      throw new Error('outer', { cause: new Error('inner cause') });
    },
    huge: () => {
      throw new Error('x'.repeat(10000));
    },
    reject_value: () => Promise.reject(5),
  };
  for (const [name, fn] of Object.entries(tools)) sdk.tool({ name, description: 'd', input: OBJ }, fn);
  assert.deepEqual(await run(sdk, 'invalid'), { ok: false, kind: 'invalid-input', message: 'bad input' });
  assert.deepEqual(await run(sdk, 'failed'), { ok: false, kind: 'failed', message: 'it broke' });
  assert.deepEqual(await run(sdk, 'async_typed'), { ok: false, kind: 'invalid-input', message: 'async bad' });
  const plain = await run(sdk, 'plain');
  assert.equal(plain.kind, 'failed');
  assert.match(plain.message, /^RangeError: deep trouble\n\nStack:\n {2}at inner /);
  assert.doesNotMatch(plain.message, /core\.js/, 'SDK frames are left out');
  assert.match((await run(sdk, 'async_plain')).message, /^Error: later/);
  assert.equal((await run(sdk, 'number')).message, 'a non-Error value was thrown: 42');
  assert.equal((await run(sdk, 'string')).message, 'a non-Error value was thrown: "just a string"');
  assert.equal((await run(sdk, 'object')).message, 'a non-Error value was thrown: {"code":7}');
  assert.equal((await run(sdk, 'undef')).message, 'a non-Error value was thrown: undefined');
  assert.equal((await run(sdk, 'reject_value')).message, 'a non-Error value was thrown: 5');
  assert.match((await run(sdk, 'cause')).message, /Caused by: Error: inner cause/);
  const huge = await run(sdk, 'huge');
  assert.ok(huge.message.length <= 4000);
  assert.match(huge.message, /\(truncated\)$/);
});

test('out of memory traps instead of becoming a tool error', async () => {
  const sdk = createSdk(stubHost());
  sdk.tool({ name: 'oom', description: 'd', input: OBJ }, () => {
    throw 'out of memory'; // what SpiderMonkey throws
  });
  sdk.tool({ name: 'oom_async', description: 'd', input: OBJ }, async () => {
    const e = new Error('out of memory');
    e.name = 'InternalError';
    throw e;
  });
  // Out of memory while parsing the input traps too (not "the input is not JSON").
  sdk.tool({ name: 'parse', description: 'd', input: OBJ }, () => 'never');
  const parse = JSON.parse;
  JSON.parse = () => {
    throw 'out of memory';
  };
  try {
    assert.throws(() => sdk.toolkit.call('parse', '{}'), (e) => !(e instanceof ComponentError));
  } finally {
    JSON.parse = parse;
  }
  for (const name of ['oom', 'oom_async']) {
    await assert.rejects(
      async () => sdk.toolkit.call(name, '{}'),
      (e) => e instanceof Error && !(e instanceof ComponentError) && !Object.prototype.hasOwnProperty.call(e, 'payload'),
    );
  }
  assert.ok(isOutOfMemory('out of memory'));
  assert.ok(!isOutOfMemory(Object.assign(new Error('allocation size overflow'), { name: 'InternalError' })));
  assert.ok(!isOutOfMemory(new Error('out of memory'))); // a plain Error is the tool's own
  assert.ok(!isOutOfMemory(42));
});

test('describeFailure handles V8 and SpiderMonkey stacks', () => {
  const sm = { name: 'Error', message: 'boom', stack: 'deeper@app/app.js:16:9\n@app/app.js:20:3\ncall@toolhost-sdk/core.js:300:10\nexport_toolkit_0_1_0$call@/x/sources/initializer.js:310:28\n' };
  assert.equal(describeFailure(sm), 'Error: boom\n\nStack:\n  deeper@app/app.js:16:9\n  @app/app.js:20:3');
  const v8 = new TypeError('t');
  assert.match(describeFailure(v8), /^TypeError: t\n\nStack:\n {2}at /);
  const nostack = new Error('n');
  nostack.stack = '';
  assert.equal(describeFailure(nostack), 'Error: n');
  const deep = { name: 'Error', message: 'm', stack: Array.from({ length: 20 }, (_, i) => `f${i}@app.js:${i}:1`).join('\n') };
  const lines = describeFailure(deep).split('\n');
  assert.equal(lines.at(-1), '  ...');
  assert.equal(lines.length, 3 + 6 + 1);
});

test('ToolError', () => {
  const e = ToolError.invalidInput('x');
  assert.ok(e instanceof Error);
  assert.equal(e.kind, 'invalid-input');
  assert.equal(e.message, 'x');
  assert.equal(ToolError.failed(3).message, '3');
  assert.throws(() => new ToolError('other', 'x'), /unknown ToolError kind/);
});

test('host: log, progress, config', () => {
  const h = stubHost({ greeting: 'Hi' });
  const sdk = createSdk(h);
  sdk.host.log('info', 'one');
  sdk.host.log('WARNING', 2);
  sdk.host.debug('three');
  sdk.host.error('four');
  assert.throws(() => sdk.host.log('loud', 'x'), /unknown log level "loud"/);
  assert.deepEqual(h.calls.logs, [['info', 'one'], ['warn', '2'], ['debug', 'three'], ['error', 'four']]);
  sdk.host.progress('half', 1, 2);
  sdk.host.progress('some');
  sdk.host.progress('n', '3', null);
  assert.deepEqual(h.calls.progress, [
    { message: 'half', done: 1, total: 2 },
    { message: 'some', done: undefined, total: undefined },
    { message: 'n', done: 3, total: undefined },
  ]);
  assert.equal(sdk.host.config('greeting'), 'Hi');
  assert.equal(sdk.host.config('missing'), undefined);
  assert.equal(sdk.host.config('missing', 'dflt'), 'dflt');
});

test('contents() of a list without content items is one JSON value', () => {
  assert.deepEqual(contents([1, 2]).map((c) => c.tag), ['json']);
  assert.deepEqual(contents([text('a'), 'b']).map((c) => c.tag), ['text', 'text']);
});
