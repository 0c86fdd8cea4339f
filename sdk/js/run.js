#!/usr/bin/env node
// Try a plugin's tools on plain node, without building a component:
//
//   node sdk/js/run.js <plugin dir>                          # tools + schemas
//   node sdk/js/run.js <plugin dir> <tool> '<input JSON>' [--config key=value ...]
//
// Log records and progress go to stderr; the result (or the tool error) to
// stdout as JSON. Exit status: 0 ok, 1 tool error, 2 usage.
import { existsSync } from 'node:fs';
import { resolve, join } from 'node:path';
import { loadPlugin } from './testing.js';

const args = process.argv.slice(2);
const config = {};
const rest = [];
for (let i = 0; i < args.length; i++) {
  if (args[i] === '--config' && i + 1 < args.length) {
    const [k, ...v] = args[++i].split('=');
    config[k] = v.join('=');
  } else rest.push(args[i]);
}
const [dir, name, input = '{}'] = rest;
if (!dir) {
  console.error('usage: node sdk/js/run.js <plugin dir> [<tool> [<input JSON>]] [--config key=value ...]');
  process.exit(2);
}
const app = join(resolve(dir), 'app.js');
if (!existsSync(app)) {
  console.error(`run.js: no ${app}`);
  process.exit(2);
}
const plugin = await loadPlugin(app, { config, echo: true });
if (!name) {
  const list = plugin.tools().map((t) => ({
    name: t.name,
    description: t.description,
    input_schema: JSON.parse(t.inputSchema),
    ...(t.outputSchema ? { output_schema: JSON.parse(t.outputSchema) } : {}),
  }));
  console.log(JSON.stringify(list, null, 2));
} else {
  const r = await plugin.call(name, input);
  if (r.ok) {
    const show = r.content.map((c) =>
      c.tag === 'binary' ? { binary: { media_type: c.val.mediaType, bytes: c.val.data.length, name: c.val.name } } : { [c.tag]: c.val },
    );
    console.log(JSON.stringify(show, null, 2));
  } else {
    console.log(JSON.stringify({ error: r.kind, message: r.message }, null, 2));
    process.exitCode = 1;
  }
}
