// Module resolution hooks (node:module register) that let a plugin's app.js
// run on plain node: "toolhost-sdk" is the SDK, the WIT import
// "toolhost:plugin/host@0.1.0" a stub (host-stub.js).
const SDK = new URL('../toolhost-sdk.js', import.meta.url).href;
const HOST = new URL('./host-stub.js', import.meta.url).href;

export async function resolve(specifier, context, nextResolve) {
  if (specifier === 'toolhost-sdk') return { url: SDK, shortCircuit: true };
  if (specifier === 'toolhost:plugin/host@0.1.0') return { url: HOST, shortCircuit: true };
  return nextResolve(specifier, context);
}
