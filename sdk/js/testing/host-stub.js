// A stand-in for the WIT import `toolhost:plugin/host@0.1.0` on plain node: it
// records log records and progress reports in `globalThis.__toolhostHost` and
// answers `config` from its `config` map (see testing.js).
function state() {
  globalThis.__toolhostHost ??= { logs: [], progress: [], config: {}, echo: false };
  return globalThis.__toolhostHost;
}

export function log(level, message) {
  const s = state();
  s.logs.push({ level, message });
  if (s.echo) process.stderr.write(`[${level}] ${message}\n`);
}

export function reportProgress(update) {
  const s = state();
  s.progress.push({ ...update });
  if (s.echo) {
    const of = update.done === undefined ? '' : ` (${update.done}${update.total === undefined ? '' : `/${update.total}`})`;
    process.stderr.write(`[progress] ${update.message}${of}\n`);
  }
}

export function config(key) {
  const v = state().config[key];
  return v === undefined || v === null ? undefined : String(v);
}
