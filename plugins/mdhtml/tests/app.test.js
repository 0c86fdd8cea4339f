// The mdhtml tools through the SDK on plain node (host imports stubbed):
//   node --test plugins/mdhtml/tests/
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { loadPlugin } from '../../../sdk/js/testing.js';

const plugin = await loadPlugin(new URL('../app.js', import.meta.url));

test('two tools with object schemas', () => {
  const tools = plugin.tools();
  assert.deepEqual(tools.map((t) => t.name), ['render', 'toc']);
  for (const t of tools) assert.equal(JSON.parse(t.inputSchema).type, 'object');
  assert.equal(JSON.parse(tools[1].outputSchema).type, 'object');
});

test('render', async () => {
  assert.deepEqual(await plugin.call('render', { markdown: '# Hi' }), { ok: true, content: [{ tag: 'text', val: '<h1 id="hi">Hi</h1>\n' }] });
  const r = await plugin.call('render', { markdown: '# Hi', heading_ids: false, heading_offset: 1 });
  assert.equal(r.content[0].val, '<h2>Hi</h2>\n');
  assert.match(plugin.host.logs.at(-1).message, /rendered 4 characters/);
});

test('render a full document', async () => {
  const r = await plugin.call('render', { markdown: 'text <x>', full_document: true });
  assert.match(r.content[0].val, /^<!DOCTYPE html>\n[\s\S]*<title>Document<\/title>[\s\S]*<p>text &lt;x&gt;<\/p>\n<\/body>\n<\/html>\n$/);
  const titled = await plugin.call('render', { markdown: '## A & B', full_document: true });
  assert.match(titled.content[0].val, /<title>A &amp; B<\/title>/);
});

test('toc', async () => {
  const r = await plugin.call('toc', { markdown: '# A\n## B\n### C\n## B', max_level: 2 });
  assert.equal(r.content.length, 1);
  assert.equal(r.content[0].tag, 'json');
  assert.deepEqual(JSON.parse(r.content[0].val), {
    count: 3,
    headings: [
      { level: 1, text: 'A', id: 'a' },
      { level: 2, text: 'B', id: 'b' },
      { level: 2, text: 'B', id: 'b-1' },
    ],
  });
  const md = await plugin.call('toc', { markdown: '## [x] y\n### z', as_markdown: true });
  assert.deepEqual(md.content.map((c) => c.tag), ['json', 'text']);
  assert.equal(md.content[1].val, '- [\\[x\\] y](#x-y)\n  - [z](#z)\n');
  const none = await plugin.call('toc', { markdown: 'no headings', as_markdown: true });
  assert.equal(none.content[1].val, '');
});

test('too much input is invalid input', async () => {
  const r = await plugin.call('render', { markdown: 'x'.repeat(500_001) });
  assert.equal(r.ok, false);
  assert.equal(r.kind, 'invalid-input');
});
