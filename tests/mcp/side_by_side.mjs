// What the official MCP TypeScript SDK's client sees of one MCP server,
// called directly and through toolhost: the same report as side_by_side.py
// makes with the Python SDK, compared by `side_by_side.py --compare-report`.
//
//   node side_by_side.mjs SDK_DIST --direct URL | --direct-stdio 'CMD ARGS' \
//       --through http://127.0.0.1:PORT/mcp --prefix every_ [--session ID] \
//       [--replace FROM=TO ...] --calls CALLS.json > report.json
//
// SDK_DIST is the SDK's dist/esm folder (the one the npm MCP servers of
// tests/mcpservers install beside them). Each side is connected as an agent
// connects (`new Client(...)`, `listTools`, `callTool`, which checks
// structured content against the tool's output schema); a call the client
// refuses is recorded as {"client_error": ...}. Toolhost's own `_meta` keys
// (`toolhost/...`) are left out. Run by tests/e2e/tests/gateway.rs.

import { readFileSync } from "node:fs";
import { pathToFileURL } from "node:url";

const [sdk, ...rest] = process.argv.slice(2);
const args = { replace: [] };
for (let i = 0; i < rest.length; i += 2) {
  const key = rest[i].replace(/^--/, "");
  if (key === "replace") args.replace.push(rest[i + 1]);
  else args[key] = rest[i + 1];
}
const load = (path) => import(pathToFileURL(`${sdk}/${path}`).href);
const { Client } = await load("client/index.js");
const { StreamableHTTPClientTransport } = await load("client/streamableHttp.js");
const { StdioClientTransport } = await load("client/stdio.js");
const { ElicitRequestSchema, CreateMessageRequestSchema } = await load("types.js");

// The server's questions are answered the same way on both sides (as
// side_by_side.py answers them): through toolhost they reach this client
// as toolhost's caller.
function answerForm(schema) {
  const out = {};
  for (const [name, prop] of Object.entries(schema?.properties ?? {})) {
    if (prop.enum) out[name] = prop.enum[0];
    else if (prop.type === "boolean") out[name] = true;
    else if (prop.type === "number" || prop.type === "integer") out[name] = prop.minimum ?? 3;
    else if (prop.type === "array") out[name] = (prop.items?.enum ?? ["a"]).slice(0, 1);
    else out[name] = prop.format === undefined ? (prop.default ?? "answer") : "someone@example.org";
  }
  return out;
}

function answering(client) {
  client.setRequestHandler(ElicitRequestSchema, async (req) => ({
    action: "accept",
    ...(req.params.mode === "url" ? {} : { content: answerForm(req.params.requestedSchema) }),
  }));
  client.setRequestHandler(CreateMessageRequestSchema, async (req) => ({
    role: "assistant",
    content: {
      type: "text",
      text: "sampled: " + req.params.messages.filter((m) => m.content.type === "text").map((m) => m.content.text).join(" "),
    },
    model: "side-by-side",
    stopReason: "endTurn",
  }));
}

function stripOurs(value) {
  if (Array.isArray(value)) return value.map(stripOurs);
  if (value && typeof value === "object") {
    const out = {};
    for (const [key, v] of Object.entries(value)) {
      if (key === "_meta" && v && typeof v === "object") {
        const kept = Object.fromEntries(Object.entries(v).filter(([k]) => !k.startsWith("toolhost/")));
        if (Object.keys(kept).length === 0) continue;
        out[key] = stripOurs(kept);
      } else {
        out[key] = stripOurs(v);
      }
    }
    return out;
  }
  return value;
}

async function observe(transport, calls, nameOf) {
  const client = new Client(
    { name: "side-by-side", version: "1.0.0" },
    { capabilities: { elicitation: { form: {}, url: {} }, sampling: {} } },
  );
  answering(client);
  await client.connect(transport);
  try {
    const listed = await client.listTools();
    const tools = listed.tools.map(stripOurs).sort((a, b) => (a.name < b.name ? -1 : 1));
    const results = [];
    for (const call of calls) {
      try {
        results.push(stripOurs(await client.callTool({ name: nameOf(call.tool), arguments: call.arguments ?? {} })));
      } catch (e) {
        results.push({ client_error: `${e.name}: ${e.message}` });
      }
    }
    return { tools, results };
  } finally {
    await client.close();
  }
}

const calls = JSON.parse(readFileSync(args.calls, "utf8"));
let directTransport;
if (args.direct) {
  directTransport = new StreamableHTTPClientTransport(new URL(args.direct));
} else {
  const [command, ...cmdArgs] = args["direct-stdio"].split(" ");
  directTransport = new StdioClientTransport({ command, args: cmdArgs });
}
// The direct side's calls name its own paths.
let directCalls = JSON.stringify(calls);
for (const r of args.replace) {
  const [from, to] = r.split("=", 2);
  directCalls = directCalls.split(to).join(from);
}
let direct = await observe(directTransport, JSON.parse(directCalls), (n) => n);
for (const r of args.replace) {
  const [from, to] = r.split("=", 2);
  direct = JSON.parse(JSON.stringify(direct).split(from).join(to));
}
const headers = args.session ? { "X-Toolhost-Session": args.session } : {};
const through = await observe(
  new StreamableHTTPClientTransport(new URL(args.through), { requestInit: { headers } }),
  calls,
  (n) => args.prefix + n,
);
through.tools = through.tools
  .filter((t) => t.name.startsWith(args.prefix))
  .map((t) => ({ ...t, name: t.name.slice(args.prefix.length) }));
const report = {
  tools: { direct: direct.tools, through: through.tools },
  calls: calls.map((call, i) => ({ ...call, direct: direct.results[i], through: through.results[i] })),
};
process.stdout.write(JSON.stringify(report) + "\n");
