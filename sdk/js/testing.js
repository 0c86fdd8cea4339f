// Run a plugin's tools on plain node, without building a component:
//
//   import { loadPlugin } from "../../../sdk/js/testing.js";
//   const plugin = await loadPlugin(new URL("../app.js", import.meta.url), { config: { greeting: "Hi" } });
//   plugin.tools();                        // what listTools answers
//   await plugin.call("greet", { name: "Ada" });
//     // -> { ok: true, content: [{tag: "text", val: "Hi, Ada."}] }  (plain objects)
//     // or { ok: false, kind: "invalid-input" | "failed", message }
//   plugin.host.logs; plugin.host.progress; // what the tool reported
//
// `import "toolhost-sdk"` in app.js resolves to the SDK and the WIT host import
// to a stub (testing/host-stub.js). One plugin per process (the SDK keeps its
// tools in a module-level registry); `node --test` runs each file in its own.
// Node is not the component's engine (StarlingMonkey / SpiderMonkey): check
// the built component with `toolhost call` too.
import { register } from 'node:module';
import { pathToFileURL } from 'node:url';

let registered = false;

/** Route "toolhost-sdk" and the WIT host import for modules loaded from now on. */
export function registerHooks() {
  if (!registered) {
    register('./testing/hooks.js', import.meta.url);
    registered = true;
  }
}

function hostState() {
  globalThis.__toolhostHost ??= { logs: [], progress: [], config: {}, echo: false };
  return globalThis.__toolhostHost;
}

/**
 * Import a plugin module (a URL, or a path) and return a harness around the
 * SDK's toolkit export.
 */
export async function loadPlugin(app, { config = {}, echo = false } = {}) {
  registerHooks();
  const state = hostState();
  Object.assign(state.config, config);
  state.echo = echo;
  const url = app instanceof URL ? app.href : /^[a-z]+:/.test(String(app)) ? String(app) : pathToFileURL(String(app)).href;
  await import(url);
  const sdk = await import('toolhost-sdk');
  return {
    host: state,
    tools: () => sdk.toolkit.listTools(),
    toolkit: sdk.toolkit,
    /** Run a tool with an input object (or JSON text): {ok, content} or {ok: false, kind, message}. */
    async call(name, input = {}) {
      const text = typeof input === 'string' ? input : JSON.stringify(input);
      try {
        const items = await sdk.toolkit.call(name, text);
        return { ok: true, content: items.map(({ tag, val }) => ({ tag, val })) };
      } catch (e) {
        if (e && e.payload) return { ok: false, kind: e.payload.tag, message: e.payload.val };
        throw e; // would trap inside a component
      }
    },
  };
}
