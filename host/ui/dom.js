// The console's DOM helpers: elements and SVG built from a tag, attributes
// and children, and numbers formatted for people.
export const $ = (sel, root = document) => root.querySelector(sel);
export const h = (tag, attrs, ...kids) => {
  const el = document.createElementNS(
    tag === 'svg' || attrs?.svg ? 'http://www.w3.org/2000/svg' : 'http://www.w3.org/1999/xhtml', tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v == null || v === false || k === 'svg') continue;
    if (k.startsWith('on')) el.addEventListener(k.slice(2), v);
    else if (k === 'text') el.textContent = v;
    else el.setAttribute(k, v === true ? '' : v);
  }
  for (const kid of kids.flat(3)) if (kid != null && kid !== false) el.append(kid);
  return el;
};
export const s = (tag, attrs, ...kids) => h(tag, { ...attrs, svg: true }, ...kids);
export const clear = (el, ...kids) => { el.replaceChildren(...kids.flat(3).filter((k) => k != null)); return el; };
export const fmt = (n, d = 1) => (n == null || Number.isNaN(n) ? '–' : Number(n).toLocaleString('en', { maximumFractionDigits: d }));
export const bytes = (n) => (n < 1024 ? `${n} B` : n < 1 << 20 ? `${fmt(n / 1024)} KiB` : `${fmt(n / 1048576)} MiB`);
