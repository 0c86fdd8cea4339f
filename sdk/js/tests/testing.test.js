// The node harness (testing.js): "toolhost-sdk" and the WIT host import resolve
// on plain node, so a plugin's app.js runs unchanged. Uses the template.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { loadPlugin } from '../testing.js';

const plugin = await loadPlugin(new URL('../template/app.js', import.meta.url), { config: { greeting: 'Hi' } });

test('the template lists its tool', () => {
  const tools = plugin.tools();
  assert.deepEqual(tools.map((t) => t.name), ['greet']);
  assert.equal(JSON.parse(tools[0].inputSchema).type, 'object');
});

test('the template greets, with the config and a log record', async () => {
  assert.deepEqual(await plugin.call('greet', { name: ' Ada ', excited: true }), {
    ok: true,
    content: [{ tag: 'text', val: 'Hi, Ada!' }],
  });
  assert.deepEqual(plugin.host.logs.at(-1), { level: 'debug', message: 'greeting "Ada"' });
  assert.deepEqual(await plugin.call('greet', { name: 'Bo' }), { ok: true, content: [{ tag: 'text', val: 'Hi, Bo.' }] });
});

test('the template refuses an empty name', async () => {
  assert.deepEqual(await plugin.call('greet', { name: '  ' }), { ok: false, kind: 'invalid-input', message: '`name` is empty' });
});
