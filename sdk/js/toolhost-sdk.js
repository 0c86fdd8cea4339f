// The toolhost JavaScript SDK: write tools, the SDK implements the `toolkit`
// export of the WIT world `plugin` (toolhost:plugin@0.1.0, wit/plugin.wit).
//
//   import { tool, json, binary, text, ToolError, host } from "toolhost-sdk";
//
//   tool({
//     name: "greet",
//     description: "Greet someone by name.",
//     input: {
//       type: "object",
//       properties: { name: { type: "string", description: "Who to greet." } },
//       required: ["name"],
//       additionalProperties: false,
//     },
//   }, ({ name }) => `Hello, ${name}.`);
//
// The logic lives in core.js; this module binds it to the host import, which
// exists inside a component (componentize-js) and, in node, through the
// loader of testing.js.
import * as hostImports from 'toolhost:plugin/host@0.1.0';
import { createSdk } from './core.js';

export { ToolError, ComponentError, Content, json, text, binary, WIT_PACKAGE, VERSION } from './core.js';

const sdk = createSdk(hostImports);

/** Register a tool: `tool({name, description, input, output?}, fn)`; returns `fn`. */
export const tool = sdk.tool;
/** The registered tools (what `listTools` answers). */
export const tools = sdk.tools;
/** `host.log(level, msg)`, `host.progress(msg, done?, total?)`, `host.config(key, fallback?)`. */
export const host = sdk.host;
/** The `toolkit` export ({listTools, call}); build.sh's entry module exports it. */
export const toolkit = sdk.toolkit;
