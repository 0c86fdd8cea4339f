// The console's metrics: the server's Prometheus text parsed per tool, the
// calls between two samples summed up, and a chart drawn as SVG.
import { h, s, fmt } from './dom.js';

// ---------- metrics: polled Prometheus text, drawn as SVG ----------
export const WINDOW_MS = 10 * 60 * 1000;
export function parseMetrics(text) {
  const tools = {};
  const get = (t) => (tools[t] ||= { calls: 0, errors: 0, buckets: {}, fuel: 0, memSum: 0, memCount: 0 });
  for (const line of text.split('\n')) {
    if (!line || line[0] === '#') continue;
    const m = /^([A-Za-z_:][\w:]*)(?:\{(.*)\})?\s+(\S+)/.exec(line);
    if (!m) continue;
    const labels = {};
    for (const l of (m[2] || '').matchAll(/(\w+)="((?:[^"\\]|\\.)*)"/g)) labels[l[1]] = l[2].replace(/\\(.)/g, '$1');
    const v = Number(m[3]);
    if (!labels.tool) continue;
    const t = get(labels.tool);
    switch (m[1]) {
      case 'toolhost_tool_calls_total': t.calls += v; if (labels.outcome !== 'ok') t.errors += v; break;
      case 'toolhost_tool_call_duration_seconds_bucket': t.buckets[labels.le] = (t.buckets[labels.le] || 0) + v; break;
      case 'toolhost_wasm_fuel_consumed_total': t.fuel += v; break;
      case 'toolhost_wasm_peak_memory_bytes_sum': t.memSum += v; break;
      case 'toolhost_wasm_peak_memory_bytes_count': t.memCount += v; break;
      default:
    }
  }
  return tools;
}
export const ZERO = { calls: 0, errors: 0, buckets: {}, fuel: 0, memSum: 0, memCount: 0 };
export function sum(tools, only) {
  if (only) return tools[only] || ZERO;
  const out = { calls: 0, errors: 0, buckets: {}, fuel: 0, memSum: 0, memCount: 0 };
  for (const t of Object.values(tools)) {
    out.calls += t.calls; out.errors += t.errors; out.fuel += t.fuel; out.memSum += t.memSum; out.memCount += t.memCount;
    for (const [le, n] of Object.entries(t.buckets)) out.buckets[le] = (out.buckets[le] || 0) + n;
  }
  return out;
}
// Quantile of the calls between two samples, from their histogram buckets
// (linear within a bucket, as Prometheus' histogram_quantile).
function quantile(q, a, b) {
  // Bucket keys as the server wrote them, in the order of their bounds.
  const keys = Object.keys(b.buckets).filter((le) => le !== '+Inf').sort((x, y) => Number(x) - Number(y));
  const delta = (le) => (b.buckets[le] || 0) - (a.buckets[le] || 0);
  const total = delta('+Inf');
  if (total <= 0) return null;
  const rank = q * total;
  let prevLe = 0; let prevN = 0;
  for (const key of keys) {
    const le = Number(key);
    const n = delta(key);
    if (n >= rank) return prevLe + (le - prevLe) * ((rank - prevN) / Math.max(n - prevN, 1e-9));
    prevLe = le; prevN = n;
  }
  return keys.length ? Number(keys.at(-1)) : null;
}
export function stats(a, b) {
  const calls = b.calls - a.calls;
  const memCalls = b.memCount - a.memCount;
  return {
    calls, errors: b.errors - a.errors,
    p50: quantile(0.5, a, b), p99: quantile(0.99, a, b),
    fuel: calls > 0 && b.fuel - a.fuel > 0 ? (b.fuel - a.fuel) / calls : null,
    mem: memCalls > 0 ? (b.memSum - a.memSum) / memCalls / 1048576 : null,
  };
}

// `since`: when the first sample was taken (the chart spans from then, a
// minute at least, ten at most).
export function chart(title, series, since) {
  const W = 400; const H = 150; const L = 40; const B = 18; const T = 8;
  const now = Date.now();
  const span = Math.min(WINDOW_MS, Math.max(60000, now - (since ?? now)));
  const t0 = now - span;
  const max = Math.max(1e-9, ...series.flatMap(([, pts]) => pts.map((p) => p[1])));
  const top = niceCeil(max);
  const x = (t) => L + ((t - t0) / span) * (W - L - 4);
  const y = (v) => T + (1 - v / top) * (H - T - B);
  const lines = series.map(([, pts], i) => (pts.length > 1
    ? s('polyline', { class: `c${i}`, fill: 'none', 'stroke-width': 1.6, points: pts.map((p) => `${x(p[0]).toFixed(1)},${y(p[1]).toFixed(1)}`).join(' ') })
    : pts.length ? s('circle', { class: `c${i}`, cx: x(pts[0][0]), cy: y(pts[0][1]), r: 2.5, fill: 'none', 'stroke-width': 2 }) : null));
  const empty = series.every(([, pts]) => !pts.length);
  return h('figure', { class: 'chart' },
    h('h3', { text: title }),
    s('svg', { viewBox: `0 0 ${W} ${H}`, role: 'img', 'aria-label': `${title}${empty ? ': no data yet' : `, up to ${fmt(max, 2)}`}` },
      s('line', { class: 'axis', x1: L, y1: H - B, x2: W - 4, y2: H - B }),
      s('line', { class: 'axis', x1: L, y1: T, x2: L, y2: H - B }),
      s('text', { x: L - 4, y: T + 8, 'text-anchor': 'end', text: fmtShort(top) }),
      s('text', { x: L - 4, y: H - B, 'text-anchor': 'end', text: '0' }),
      s('text', { x: L, y: H - 4, text: span >= 120000 ? `−${Math.round(span / 60000)} min` : `−${Math.round(span / 1000)} s` }),
      s('text', { x: W - 4, y: H - 4, 'text-anchor': 'end', text: 'now' }),
      empty ? s('text', { x: (W + L) / 2, y: H / 2, 'text-anchor': 'middle', text: 'no calls yet' }) : null,
      lines),
    h('div', { class: 'legend' }, series.map(([name], i) => h('span', {}, h('span', { class: `sw c${i}` }), name))));
}
function niceCeil(v) {
  const p = 10 ** Math.floor(Math.log10(v));
  for (const m of [1, 2, 2.5, 5, 10]) if (m * p >= v) return m * p;
  return 10 * p;
}
const fmtShort = (v) => (v >= 1e9 ? `${fmt(v / 1e9)}G` : v >= 1e6 ? `${fmt(v / 1e6)}M` : v >= 1e3 ? `${fmt(v / 1e3)}k` : fmt(v, 2));
