// JSON Schema in the console: a tool's input described as a table, and the
// playground's form built from it (an editor per field).
import { h } from './dom.js';

// ---------- JSON Schema helpers ----------
export function deref(schema, root, depth = 0) {
  if (!schema || typeof schema !== 'object' || depth > 20) return schema || {};
  if (schema.$ref && schema.$ref.startsWith('#/')) {
    let target = root;
    for (const part of schema.$ref.slice(2).split('/')) target = target?.[part.replace(/~1/g, '/').replace(/~0/g, '~')];
    const { $ref, ...rest } = schema;
    return deref({ ...target, ...rest }, root, depth + 1);
  }
  const alts = schema.anyOf || schema.oneOf;
  if (alts && !schema.type && alts.length && alts.every((a) => a.const !== undefined)) {
    // A closed set written as alternatives of constants: an enum.
    const { anyOf, oneOf, ...rest } = schema;
    return { ...rest, type: alts[0].type, enum: alts.map((a) => a.const) };
  }
  if (alts && !schema.type) {
    const real = alts.filter((a) => a.type !== 'null');
    if (real.length === 1) {
      const { anyOf, oneOf, ...rest } = schema;
      return deref({ ...real[0], ...rest, nullable: true }, root, depth + 1);
    }
  }
  if (schema.allOf && schema.allOf.length === 1 && !schema.type) {
    const { allOf, ...rest } = schema;
    return deref({ ...allOf[0], ...rest }, root, depth + 1);
  }
  return schema;
}
function kindOf(schema) {
  if (schema.enum) return 'enum';
  if (schema.const !== undefined) return 'const';
  let t = schema.type;
  if (Array.isArray(t)) t = t.find((x) => x !== 'null');
  if (!t && schema.properties) t = 'object';
  if (!t && schema.items) t = 'array';
  if (t === 'object' && !schema.properties) return 'json';
  return ['string', 'number', 'integer', 'boolean', 'object', 'array'].includes(t) ? t : 'json';
}
function typeLabel(schema, root) {
  const k = kindOf(schema);
  if (k === 'enum') return `one of ${schema.enum.map((v) => JSON.stringify(v)).join(', ')}`;
  if (k === 'array') return `array of ${typeLabel(deref(schema.items, root), root)}`;
  if (k === 'json') return schema.anyOf || schema.oneOf ? 'any of several shapes' : schema.type || 'any JSON';
  return schema.format ? `${k} (${schema.format})` : k;
}
function constraints(sc) {
  const c = [];
  for (const [k, label] of [['minimum', '≥'], ['maximum', '≤'], ['exclusiveMinimum', '>'], ['exclusiveMaximum', '<'],
    ['minLength', 'min length'], ['maxLength', 'max length'], ['minItems', 'min items'], ['maxItems', 'max items'], ['pattern', 'pattern']]) {
    if (sc[k] !== undefined) c.push(`${label} ${sc[k]}`);
  }
  if (sc.default !== undefined) c.push(`default ${JSON.stringify(sc.default)}`);
  return c.join(', ');
}
export function schemaTable(schema) {
  const rows = [];
  const walk = (sc, prefix, depth) => {
    sc = deref(sc, schema);
    const req = new Set(sc.required || []);
    for (const [name, raw] of Object.entries(sc.properties || {})) {
      const p = deref(raw, schema);
      rows.push(h('tr', { class: depth ? 'nest' : null },
        h('td', {}, h('code', { text: prefix + name }), req.has(name) ? h('span', { class: 'req', title: 'required', text: ' *' }) : null),
        h('td', { text: typeLabel(p, schema) }),
        h('td', {}, p.description || '', constraints(p) ? h('div', { class: 'muted', text: constraints(p) }) : null)));
      if (kindOf(p) === 'object' && depth < 4) walk(p, `${prefix}${name}.`, depth + 1);
      const items = p.items && deref(p.items, schema);
      if (items && kindOf(items) === 'object' && depth < 4) walk(items, `${prefix}${name}[].`, depth + 1);
    }
  };
  walk(schema, '', 0);
  if (!rows.length) return h('p', { class: 'muted', text: schema.description || 'No parameters.' });
  return h('div', { class: 'scroll' }, h('table', { class: 'schema' },
    h('thead', {}, h('tr', {}, h('th', { text: 'Field' }), h('th', { text: 'Type' }), h('th', { text: 'Description' }))),
    h('tbody', {}, rows)));
}

// ---------- playground: a form from the schema ----------
let fieldSeq = 0;
const LONG_TEXT = /^(code|content|text|html|markdown|command|script|source|body|query|prompt|value)$/i;
// An editor: { el, get() -> value | undefined (unset), set(value) }.
function editor(raw, root, name, required) {
  const sc = deref(raw, root);
  const id = `f${++fieldSeq}`;
  const kind = kindOf(sc);
  const hint = sc.description ? h('div', { class: 'hint', id: `${id}-d`, text: sc.description }) : null;
  const label = () => h('label', { for: id }, name, required ? h('span', { class: 'req', title: 'required', text: ' *' }) : null,
    h('span', { class: 'hint', text: ` ${typeLabel(sc, root)}` }));
  const wrap = (control) => h('div', { class: 'field' }, label(), control, hint);
  const common = { id, name, 'aria-describedby': hint ? `${id}-d` : null, 'data-field': name };
  let ed;
  if (kind === 'object') ed = objectEditor(sc, root, name, id);
  else if (kind === 'array') ed = arrayEditor(sc, root, name, id, hint);
  else if (kind === 'enum' || kind === 'const') {
    const values = kind === 'const' ? [sc.const] : sc.enum;
    const sel = h('select', common, required && kind === 'const' ? null : h('option', { value: '', text: required ? '(choose)' : '(unset)' }),
      values.map((v, i) => h('option', { value: String(i), text: typeof v === 'string' ? v : JSON.stringify(v) })));
    ed = { el: wrap(sel), get: () => (sel.value === '' ? undefined : values[Number(sel.value)]),
      set: (v) => { const i = values.findIndex((x) => JSON.stringify(x) === JSON.stringify(v)); sel.value = i < 0 ? '' : String(i); } };
  } else if (kind === 'boolean') {
    const sel = h('select', common, h('option', { value: '', text: '(unset)' }), h('option', { value: 'true', text: 'true' }), h('option', { value: 'false', text: 'false' }));
    ed = { el: wrap(sel), get: () => (sel.value === '' ? undefined : sel.value === 'true'), set: (v) => { sel.value = v == null ? '' : String(!!v); } };
  } else if (kind === 'number' || kind === 'integer') {
    const inp = h('input', { ...common, type: 'number', step: kind === 'integer' ? '1' : 'any', min: sc.minimum, max: sc.maximum, inputmode: 'decimal' });
    ed = { el: wrap(inp), get: () => (inp.value === '' ? undefined : Number(inp.value)), set: (v) => { inp.value = v == null ? '' : String(v); } };
  } else if (kind === 'string') {
    const long = LONG_TEXT.test(name) || sc.format === 'textarea' || sc.contentMediaType;
    const inp = long ? h('textarea', { ...common, rows: 4, spellcheck: 'false' }) : h('input', { ...common, type: 'text', autocomplete: 'off', spellcheck: 'false' });
    ed = { el: wrap(inp), get: () => (inp.value === '' ? undefined : inp.value), set: (v) => { inp.value = v == null ? '' : String(v); } };
  } else {
    const ta = h('textarea', { ...common, rows: 3, spellcheck: 'false', placeholder: 'JSON' });
    ed = { el: wrap(ta),
      get: () => {
        if (ta.value.trim() === '') return undefined;
        try { return JSON.parse(ta.value); } catch (e) { throw new Error(`${name}: not JSON (${e.message})`); }
      },
      set: (v) => { ta.value = v === undefined ? '' : JSON.stringify(v, null, 2); } };
  }
  if (sc.default !== undefined && kind !== 'object' && kind !== 'array') ed.set(sc.default);
  return ed;
}
export function objectEditor(sc, root, name, id) {
  const req = new Set(sc.required || []);
  const fields = Object.entries(sc.properties || {}).map(([k, v]) => [k, editor(v, root, k, req.has(k))]);
  const body = fields.map(([, e]) => e.el);
  const el = name === null ? h('div', {}, body)
    : h('fieldset', { id, 'data-field': name }, h('legend', { text: name }), sc.description ? h('div', { class: 'hint', text: sc.description }) : null, body);
  return {
    el,
    get: () => {
      const out = {};
      for (const [k, e] of fields) { const v = e.get(); if (v !== undefined) out[k] = v; }
      return name !== null && Object.keys(out).length === 0 ? undefined : out;
    },
    set: (v) => { for (const [k, e] of fields) e.set(v?.[k]); },
  };
}
function arrayEditor(sc, root, name, id, hint) {
  const items = [];
  const list = h('div', {});
  const add = (value) => {
    const ed = editor(sc.items || {}, root, `${name}[${items.length}]`, true);
    const row = h('div', { class: 'arr-item' }, ed.el,
      h('button', { type: 'button', class: 'ghost small', 'aria-label': `Remove item of ${name}`, text: 'Remove',
        onclick: () => { items.splice(items.indexOf(entry), 1); row.remove(); } }));
    const entry = { ed, row };
    items.push(entry); list.append(row);
    if (value !== undefined) ed.set(value);
    return ed;
  };
  const el = h('fieldset', { id, 'data-field': name }, h('legend', { text: `${name} (${typeLabel(sc, root)})` }), hint, list,
    h('button', { type: 'button', class: 'ghost small', text: `Add item`, 'aria-label': `Add an item to ${name}`, onclick: () => {
      const ed = add(); ed.el.querySelector('input,select,textarea')?.focus();
    } }));
  return {
    el,
    get: () => (items.length ? items.map((i) => i.ed.get()).filter((v) => v !== undefined) : undefined),
    set: (v) => { for (const i of items.splice(0)) i.row.remove(); if (Array.isArray(v)) v.forEach((x) => add(x)); },
  };
}
