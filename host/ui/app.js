// toolhost console. Plain JavaScript, no framework, no build step: it talks
// to the server's own API (GET /tools, /plugins, /metrics, POST
// /tools/{id}/invoke, the XAgent workspace routes, GET /sessions) with the
// token the user gives, kept in sessionStorage for this tab only. An ES
// module (strict): its helpers are dom.js, schema.js and charts.js.
import { $, h, clear, fmt, bytes } from './dom.js';
import { deref, schemaTable, objectEditor } from './schema.js';
import { WINDOW_MS, ZERO, parseMetrics, sum, stats, chart } from './charts.js';

(() => {
  // ---------- state ----------
  const store = window.sessionStorage;
  const HTTP_OF_KIND = {
    not_found: 404, invalid_input: 422, tool_error: 500, out_of_fuel: 500, out_of_memory: 500, trap: 500,
    output_too_large: 500, timeout: 504, overloaded: 429, backend_unavailable: 503, not_active: 409,
    internal: 500, unauthorized: 401, forbidden: 403, rate_limited: 429,
  };

  const S = {
    token: store.getItem('toolhost.token') || '',
    signedIn: false,
    admin: false,
    open: false, // the server needs no caller token
    tools: [],
    byId: new Map(),
    plugins: null,
    sessions: JSON.parse(store.getItem('toolhost.sessions') || '[]'),
    session: store.getItem('toolhost.session') || '',
    samples: [],
    view: '',
  };

  async function api(path, opts = {}) {
    const headers = new Headers(opts.headers || {});
    if (S.token && !opts.anonymous) headers.set('authorization', `Bearer ${S.token}`);
    const res = await fetch(path, { ...opts, headers, credentials: 'same-origin' });
    if (res.status === 401 && S.signedIn && !opts.anonymous) signOut('The server refused the token (401). Sign in again.');
    return res;
  }
  async function apiJson(path, opts) {
    const res = await api(path, opts);
    let body = null;
    try { body = await res.json(); } catch { /* not JSON */ }
    return { status: res.status, ok: res.ok, body, res };
  }
  const errorText = (body, status) =>
    body?.error?.message || (typeof body?.detail === 'string' ? body.detail : body?.detail?.message) || `HTTP ${status}`;

  // ---------- sign in ----------
  async function signIn(token) {
    const probe = await api('/tools', { anonymous: true });
    S.open = probe.ok;
    if (!token) {
      if (!S.open) return 'This server needs a token.';
      S.token = ''; S.admin = false;
      store.removeItem('toolhost.token');
      return null;
    }
    S.token = token;
    const r = await apiJson('/tools', { anonymous: false });
    if (r.status === 401) { S.token = ''; return `Token refused: ${errorText(r.body, r.status)}.`; }
    if (!r.ok) { S.token = ''; return `The server answered ${r.status}: ${errorText(r.body, r.status)}`; }
    const admin = await api('/tools?include=all');
    S.admin = admin.ok;
    if (!S.admin && S.open) {
      S.token = '';
      return 'Token refused: this server needs no caller token, and this is not its admin token.';
    }
    store.setItem('toolhost.token', token);
    return null;
  }

  function signOut(message) {
    S.signedIn = false; S.admin = false; S.token = '';
    store.removeItem('toolhost.token');
    $('#login-msg').className = 'msg';
    showLogin(message);
    route();
  }

  function showLogin(problem) {
    $('#no-token').hidden = !S.open;
    $('#login-msg').textContent = problem || '';
  }

  async function enter() {
    S.signedIn = true;
    $('#who').textContent = S.admin ? 'admin' : S.token ? 'caller' : 'no token (open server)';
    $('#token-button').textContent = S.token ? 'Sign out' : 'Sign in';
    for (const el of document.querySelectorAll('.admin-only')) el.hidden = !S.admin;
    await Promise.all([loadCatalog(), pollPlugins()]);
    if (!location.hash || location.hash === '#/login') location.hash = '#/tools';
    route();
  }

  $('#login-form').addEventListener('submit', async (e) => {
    e.preventDefault();
    const msg = $('#login-msg');
    msg.textContent = ''; msg.className = 'msg';
    const problem = await signIn($('#token').value.trim());
    if (problem) { msg.textContent = problem; $('#token').focus(); return; }
    $('#token').value = '';
    await enter();
  });
  $('#no-token').addEventListener('click', async () => {
    const problem = await signIn('');
    if (problem) { $('#login-msg').textContent = problem; return; }
    await enter();
  });
  $('#token-button').addEventListener('click', () => {
    if (S.token) signOut('Signed out.');
    else { S.signedIn = false; showLogin(''); location.hash = '#/login'; route(); }
  });

  // ---------- routing ----------
  const VIEWS = ['login', 'tools', 'play', 'sessions', 'plugins', 'metrics'];
  function route(focus) {
    let [, view, arg] = (location.hash || '#/tools').split('/');
    if (!S.signedIn) view = 'login';
    if (!VIEWS.includes(view)) view = 'tools';
    for (const v of VIEWS) $(`#view-${v}`).hidden = v !== view;
    for (const a of document.querySelectorAll('#nav a')) {
      if (a.dataset.view === view) a.setAttribute('aria-current', 'page');
      else a.removeAttribute('aria-current');
    }
    $('#nav').hidden = !S.signedIn;
    S.view = view;
    if (view === 'play') showPlayground(arg ? decodeURIComponent(arg) : '');
    if (view === 'sessions') renderSessions();
    if (view === 'plugins') renderPlugins();
    if (view === 'metrics') renderMetrics();
    if (view === 'login') $('#token').focus();
    else if (focus) { const t = $(`#${view}-h`); t.tabIndex = -1; t.focus(); }
  }
  window.addEventListener('hashchange', () => route(true));

  // ---------- catalogue ----------
  async function loadCatalog() {
    const all = S.admin ? 'include=all' : '';
    const [list, mcp, plugins] = await Promise.all([
      apiJson(`/tools${all ? `?${all}` : ''}`),
      apiJson(`/tools?format=mcp${all ? `&${all}` : ''}`),
      apiJson('/plugins'),
    ]);
    if (!list.ok) return;
    const schemas = new Map((mcp.body?.tools || []).map((t) => [t.name, t]));
    const owner = new Map();
    for (const p of plugins.body?.plugins || []) for (const id of p.tools || []) owner.set(id, p);
    S.tools = list.body.tools.map((t) => ({
      id: t.tool_id, name: t.name, category: t.category, description: t.description, status: t.status,
      toolkit: owner.get(t.tool_id)?.name || t.category, backend: owner.get(t.tool_id)?.backend || '?',
      input: schemas.get(t.tool_id)?.inputSchema || { type: 'object' },
      output: schemas.get(t.tool_id)?.outputSchema || null,
    })).sort((a, b) => a.id.localeCompare(b.id));
    S.byId = new Map(S.tools.map((t) => [t.id, t]));
    renderCatalog();
    fillToolSelects();
  }

  let searchSeq = 0;
  let searchTimer = 0;
  $('#search').addEventListener('input', () => { clearTimeout(searchTimer); searchTimer = setTimeout(renderCatalog, 200); });
  async function renderCatalog() {
    const q = $('#search').value.trim();
    let tools = S.tools;
    const seq = ++searchSeq;
    if (q) {
      // The same retrieval as XAgent's /retrieving_tools (BM25 over names,
      // descriptions and parameters), best first.
      const r = await apiJson('/retrieving_tools', {
        method: 'POST', headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ question: q, top_k: 20 }),
      });
      if (seq !== searchSeq) return;
      tools = (r.body?.retrieved_tools || []).map((id) => S.byId.get(id)).filter(Boolean);
    }
    $('#tools-count').textContent = q
      ? `${tools.length} tool${tools.length === 1 ? '' : 's'} for “${q}”, best first`
      : `${tools.length} tools`;
    clear($('#tools-list'), tools.map(toolCard));
  }

  function toolCard(t) {
    const schemaBox = (label, schema) => {
      if (!schema) return null;
      const d = h('details', {}, h('summary', { text: label }));
      d.addEventListener('toggle', () => {
        if (d.open && d.children.length === 1) d.append(schemaTable(schema), h('details', {}, h('summary', { text: 'as JSON' }), h('pre', { text: JSON.stringify(schema, null, 2) })));
      });
      return d;
    };
    return h('li', { class: 'card', 'data-tool': t.id },
      h('h2', {}, h('a', { href: `#/play/${encodeURIComponent(t.id)}`, text: t.id }),
        h('span', { class: `badge ${t.status}`, text: t.status })),
      h('div', { class: 'meta' }, h('span', { text: `toolkit ${t.toolkit}` }), '·', h('span', { text: `backend ${t.backend}` }),
        t.category !== t.toolkit ? ['·', h('span', { text: `category ${t.category}` })] : null),
      h('p', { text: t.description }),
      schemaBox('Input schema', t.input), schemaBox('Output schema', t.output));
  }


  const play = { tool: null, form: null, ctl: null };
  function fillToolSelects() {
    const sel = $('#play-tool');
    const current = sel.value;
    clear(sel, h('option', { value: '', text: '(choose a tool)' }), S.tools.map((t) => h('option', { value: t.id, text: t.id })));
    sel.value = S.byId.has(current) ? current : '';
    const msel = $('#metrics-tool');
    const mcur = msel.value;
    clear(msel, h('option', { value: '', text: '(all tools)' }), S.tools.map((t) => h('option', { value: t.id, text: t.id })));
    msel.value = S.byId.has(mcur) ? mcur : '';
  }
  function fillSessionSelect() {
    const sel = $('#play-session');
    clear(sel, h('option', { value: '', text: '(a new session)' }), S.sessions.map((id) => h('option', { value: id, text: id })));
    sel.value = S.sessions.includes(S.session) ? S.session : '';
  }
  $('#play-tool').addEventListener('change', (e) => { location.hash = `#/play/${encodeURIComponent(e.target.value)}`; });
  $('#play-session').addEventListener('change', (e) => { S.session = e.target.value; store.setItem('toolhost.session', S.session); });

  function showPlayground(id) {
    fillSessionSelect();
    if (id && play.tool?.id === id) return;
    const t = S.byId.get(id);
    play.tool = t || null;
    $('#play-tool').value = t ? t.id : '';
    $('#play-desc').textContent = t ? t.description : 'Choose a tool from the list or the catalogue.';
    $('#play-form').hidden = !t;
    clear($('#play-result')); clear($('#play-progress'));
    if (!t) { clear($('#play-fields')); return; }
    // The root object: its fields without a fieldset.
    play.form = objectEditor(deref(t.input, t.input), t.input, null, 'root');
    clear($('#play-fields'), play.form.el);
    $('#play-raw').checked = false;
    $('#play-json').hidden = true; $('#play-fields').hidden = false;
  }
  $('#play-raw').addEventListener('change', (e) => {
    const ta = $('#play-json');
    try {
      if (e.target.checked) ta.value = JSON.stringify(play.form.get() || {}, null, 2);
      else play.form.set(JSON.parse(ta.value || '{}'));
    } catch (err) { e.target.checked = !e.target.checked; showError(0, { error: { kind: 'invalid_input', message: err.message } }); return; }
    ta.hidden = !e.target.checked; $('#play-fields').hidden = e.target.checked;
  });
  function collect() {
    if ($('#play-raw').checked) {
      try { return JSON.parse($('#play-json').value || '{}'); } catch (e) { throw new Error(`The input is not JSON: ${e.message}`); }
    }
    return play.form.get() || {};
  }
  function rememberSession(id) {
    if (!id) return;
    if (!S.sessions.includes(id)) { S.sessions.unshift(id); S.sessions = S.sessions.slice(0, 50); store.setItem('toolhost.sessions', JSON.stringify(S.sessions)); }
    S.session = id; store.setItem('toolhost.session', id);
    fillSessionSelect();
  }
  function forgetSession(id) {
    S.sessions = S.sessions.filter((x) => x !== id);
    store.setItem('toolhost.sessions', JSON.stringify(S.sessions));
    if (S.session === id) { S.session = ''; store.removeItem('toolhost.session'); }
    fillSessionSelect();
  }

  $('#play-cancel').addEventListener('click', () => play.ctl?.abort());
  // Ctrl+Enter submits from a text area too (Enter submits from a field).
  $('#play-form').addEventListener('keydown', (e) => {
    if (e.key === 'Enter' && (e.ctrlKey || e.metaKey)) { e.preventDefault(); $('#play-form').requestSubmit(); }
  });
  $('#play-form').addEventListener('submit', async (e) => {
    e.preventDefault();
    const t = play.tool;
    if (!t || play.ctl) return;
    let params;
    try { params = collect(); } catch (err) { showError(0, { error: { kind: 'invalid_input', message: err.message } }); return; }
    const stream = $('#play-stream').checked;
    const headers = { 'content-type': 'application/json' };
    // A session named here, not left to the server: a session the server
    // makes for a call that names none is forgotten after it if untouched.
    if (!S.session) rememberSession(`console-${[...crypto.getRandomValues(new Uint8Array(8))].map((x) => x.toString(16).padStart(2, '0')).join('')}`);
    headers['x-toolhost-session'] = S.session;
    if (stream) headers.accept = 'text/event-stream';
    play.ctl = new AbortController();
    $('#play-invoke').disabled = true; $('#play-cancel').disabled = false;
    const progress = $('#play-progress');
    clear(progress, h('p', { class: 'progress', text: `Calling ${t.id}…` }));
    clear($('#play-result'));
    const started = performance.now();
    try {
      const res = await api(`/tools/${encodeURIComponent(t.id)}/invoke`, {
        method: 'POST', headers, body: JSON.stringify({ params }), signal: play.ctl.signal,
      });
      rememberSession(res.headers.get('x-toolhost-session'));
      const version = res.headers.get('x-toolhost-plugin-version');
      if (stream && res.ok && (res.headers.get('content-type') || '').includes('text/event-stream')) {
        await readEvents(res, (event, data) => {
          if (event === 'progress') showProgress(data.chunk || {});
          else if (event === 'result') showResult(data, version, started);
          else if (event === 'error') showError(HTTP_OF_KIND[data.error?.kind] || 500, data, true);
        });
      } else {
        let body = null;
        try { body = await res.json(); } catch { body = { error: { kind: 'internal', message: `HTTP ${res.status} without a JSON body` } }; }
        if (res.ok) showResult(body, version, started); else showError(res.status, body);
      }
    } catch (err) {
      showError(0, { error: { kind: err.name === 'AbortError' ? 'cancelled' : 'network', message: err.name === 'AbortError' ? 'Cancelled: the server stops the call when its client goes away.' : err.message } });
    } finally {
      play.ctl = null;
      $('#play-invoke').disabled = false; $('#play-cancel').disabled = true;
      const p = progress.querySelector('p.progress:first-child');
      if (p && p.textContent.endsWith('…')) p.remove();
    }
  });

  async function readEvents(res, onEvent) {
    const reader = res.body.getReader();
    const dec = new TextDecoder();
    let buf = '';
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buf += dec.decode(value, { stream: true });
      let i;
      while ((i = buf.search(/\r?\n\r?\n/)) >= 0) {
        const block = buf.slice(0, i);
        buf = buf.slice(i).replace(/^\r?\n\r?\n/, '');
        let event = 'message';
        const data = [];
        for (const line of block.split(/\r?\n/)) {
          if (line.startsWith('event:')) event = line.slice(6).trim();
          else if (line.startsWith('data:')) data.push(line.slice(5).replace(/^ /, ''));
        }
        if (data.length) { try { onEvent(event, JSON.parse(data.join('\n'))); } catch { /* keep-alive or garbage */ } }
      }
    }
  }
  function showProgress(chunk) {
    const box = $('#play-progress');
    let bar = box.querySelector('progress');
    let log = box.querySelector('ol');
    if (!log) { clear(box, h('p', { class: 'progress', text: 'Progress' }), bar = h('progress', { max: 1, 'aria-label': 'Progress' }), log = h('ol', { class: 'events' })); }
    if (chunk.total) { bar.max = chunk.total; bar.value = chunk.done || 0; } else bar.removeAttribute('value');
    const text = chunk.message || (chunk.total ? `${fmt(chunk.done)} of ${fmt(chunk.total)}` : JSON.stringify(chunk));
    log.append(h('li', { text }));
    log.scrollTop = log.scrollHeight;
  }

  function showResult(body, version, started) {
    const items = body.content || [];
    const meta = [`${fmt(body.elapsed_ms, 2)} ms on the server`, `${fmt(performance.now() - started, 0)} ms round trip`];
    if (body.fuel != null) meta.push(`${fmt(body.fuel, 0)} fuel`);
    if (version || body.version) meta.push(`version ${(version || body.version).slice(0, 12)}`);
    clear($('#play-result'), h('div', { class: 'result', 'data-status': 'success' },
      h('h2', {}, 'Result ', h('span', { class: 'badge ok', text: 'success' })),
      h('div', { class: 'meta', text: meta.join(' · ') }),
      items.map(contentItem),
      h('details', {}, h('summary', { text: 'Raw response' }), h('pre', { text: JSON.stringify(body, (k, v) => (k === 'data' && typeof v === 'string' && v.length > 200 ? `${v.slice(0, 200)}… (${v.length} chars)` : v), 2) }))));
  }
  function showError(status, body, streamed) {
    const err = body?.error || {};
    const kind = err.kind || (body?.detail ? 'error' : 'unknown');
    const code = status ? `${status}${streamed ? ' (streamed)' : ''} ${kind}` : kind;
    clear($('#play-result'), h('div', { class: 'result error', role: 'alert', 'data-status': 'error', 'data-kind': kind },
      h('h2', {}, 'Error ', h('span', { class: 'badge bad', text: code })),
      h('p', { text: err.message || errorText(body, status) }),
      Array.isArray(err.details) && err.details.length ? h('ul', {}, err.details.map((d) => h('li', { text: typeof d === 'string' ? d : JSON.stringify(d) }))) : null));
  }
  function b64bytes(b64) {
    const bin = atob(b64);
    const out = new Uint8Array(bin.length);
    for (let i = 0; i < bin.length; i++) out[i] = bin.charCodeAt(i);
    return out;
  }
  function contentItem(c) {
    if (c.type === 'text') return h('pre', { class: 'text-item', text: c.text });
    if (c.type === 'json') return h('ul', { class: 'tree json-item' }, jsonTree(c.json, null, 0));
    if (c.type === 'binary') {
      const mt = c.media_type || 'application/octet-stream';
      const blob = new Blob([b64bytes(c.data || '')], { type: mt });
      const url = URL.createObjectURL(blob);
      const link = h('a', { href: url, download: c.name || 'download', text: `Download ${c.name || 'file'} (${mt}, ${bytes(blob.size)})` });
      if (/^image\/(png|jpeg|gif|webp|svg\+xml|bmp)$/.test(mt)) {
        return h('figure', { class: 'image-item' }, h('img', { src: url, alt: c.name || 'image result' }), h('figcaption', {}, link));
      }
      return h('p', { class: 'file-item' }, link);
    }
    return h('pre', { text: JSON.stringify(c, null, 2) });
  }
  function jsonTree(v, key, depth) {
    const k = key == null ? null : [h('span', { class: 'k', text: JSON.stringify(key) }), ': '];
    if (v === null || typeof v !== 'object') {
      const cls = typeof v === 'string' ? 's' : typeof v === 'number' ? 'n' : 'b';
      const text = typeof v === 'string' && v.length > 2000 ? `${JSON.stringify(v.slice(0, 2000))}… (${v.length} chars)` : JSON.stringify(v);
      return h('li', {}, k, h('span', { class: cls, text }));
    }
    const entries = Array.isArray(v) ? v.map((x, i) => [i, x]) : Object.entries(v);
    const shown = entries.slice(0, 200);
    const open = Array.isArray(v) ? '[' : '{';
    const close = Array.isArray(v) ? ']' : '}';
    if (!entries.length) return h('li', {}, k, `${open}${close}`);
    return h('li', {}, h('details', { open: depth < 3 },
      h('summary', {}, k, `${open} ${entries.length} ${Array.isArray(v) ? 'items' : 'keys'} ${close}`),
      h('ul', {}, shown.map(([kk, x]) => jsonTree(x, Array.isArray(v) ? null : kk, depth + 1)),
        entries.length > shown.length ? h('li', { class: 'muted', text: `… ${entries.length - shown.length} more` }) : null)));
  }

  // ---------- sessions and workspaces ----------
  // The workspace routes are XAgent's, which name the session by its
  // `node_id` cookie.
  const useCookie = (id) => { document.cookie = `node_id=${id}; path=/; SameSite=Strict`; };
  let openSession = '';
  async function renderSessions() {
    const list = $('#sessions-list');
    // A caller sees its own sessions (an admin every caller's, only its own
    // listed here: another caller's id names a session of the admin's own).
    const r = await apiJson('/sessions');
    const server = r.ok ? r.body : null;
    const mine = (server?.sessions || []).filter((x) => !x.caller || x.caller === server.caller);
    const idle = new Map(mine.map((x) => [x.id, x.idle_s]));
    const ids = [...new Set([...mine.map((x) => x.id), ...S.sessions])];
    const others = (server?.sessions || []).length - mine.length;
    $('#sessions-note').textContent = server
      ? `Signed in as ${server.caller}: its open sessions${others ? ` (and ${others} of other callers, not listed)` : ''}; sessions are closed after ${fmt(server.idle_timeout_s, 0)} s unused.`
      : 'Sessions opened from this tab. The admin token lists every session of the server.';
    clear(list, ids.length ? ids.map((id) => h('li', { class: id === openSession ? 'sel' : null, 'data-session': id },
      h('code', { text: id }),
      idle.has(id) ? h('span', { class: 'muted', text: `idle ${fmt(idle.get(id), 0)} s` }) : server ? h('span', { class: 'muted', text: 'gone from the server' }) : null,
      h('button', { type: 'button', class: 'small', text: 'Open', 'aria-label': `Open session ${id}`, onclick: () => showWorkspace(id) }),
      h('button', { type: 'button', class: 'ghost small', text: 'Use in playground', onclick: () => { rememberSession(id); location.hash = `#/play/${play.tool ? encodeURIComponent(play.tool.id) : ''}`; } }),
      h('button', { type: 'button', class: 'danger small', text: 'Close', 'aria-label': `Close session ${id}`, onclick: () => closeSession(id) })))
      : h('li', { class: 'muted', text: 'No sessions yet: invoke a tool or make a new one.' }));
  }
  $('#session-refresh').addEventListener('click', () => { renderSessions(); if (openSession) showWorkspace(openSession); });
  $('#session-new').addEventListener('click', async () => {
    const r = await apiJson('/get_cookie', { method: 'POST' });
    if (!r.ok) { clear($('#session-detail'), h('p', { class: 'msg', text: errorText(r.body, r.status) })); return; }
    rememberSession(r.body.node_id);
    await renderSessions();
    showWorkspace(r.body.node_id);
  });
  async function closeSession(id) {
    const r = await apiJson(`/sessions/${encodeURIComponent(id)}`, { method: 'DELETE' });
    forgetSession(id);
    if (openSession === id) { openSession = ''; clear($('#session-detail')); }
    await renderSessions();
    if (!r.ok && r.status !== 404) clear($('#session-detail'), h('p', { class: 'msg', text: errorText(r.body, r.status) }));
  }
  // A session's files, through the native workspace routes (under the
  // signed-in caller's own session).
  const filesRoute = (id, path) =>
    `/sessions/${encodeURIComponent(id)}/files` + (path == null ? '' : `/${path.split('/').map(encodeURIComponent).join('/')}`);
  // The flat list as a tree: {name, type, size, children}.
  function fileTree(files) {
    const root = { children: [] };
    for (const f of files) {
      const parts = f.path.split('/');
      let dir = root;
      for (const part of parts.slice(0, -1)) {
        let next = dir.children.find((c) => c.type === 'directory' && c.name === part);
        if (!next) { next = { name: part, type: 'directory', children: [] }; dir.children.push(next); }
        dir = next;
      }
      dir.children.push({ name: parts[parts.length - 1], type: 'file', size: f.size });
    }
    const sort = (n) => { n.children?.sort((a, b) => a.name.localeCompare(b.name)); n.children?.forEach(sort); };
    sort(root);
    return root.children;
  }
  async function showWorkspace(id) {
    openSession = id;
    useCookie(id);
    const r = await apiJson(filesRoute(id));
    const box = $('#session-detail');
    for (const li of document.querySelectorAll('#sessions-list li')) li.classList.toggle('sel', li.dataset.session === id);
    if (!r.ok) { clear(box, h('h2', { text: `Session ${id}` }), h('p', { class: 'msg', text: errorText(r.body, r.status) })); return; }
    const fileInput = h('input', { type: 'file', id: 'ws-file', multiple: true });
    const dirInput = h('input', { type: 'text', id: 'ws-dir', placeholder: 'folder (optional)', autocomplete: 'off' });
    const msg = h('p', { class: 'msg', role: 'status' });
    const upload = h('form', { class: 'box', id: 'ws-upload' }, h('h3', { text: 'Upload into the workspace' }),
      h('div', { class: 'grid2' }, h('label', { for: 'ws-file' }, 'Files', fileInput), h('label', { for: 'ws-dir' }, 'Folder', dirInput)),
      h('div', { class: 'row' }, h('button', { type: 'submit', text: 'Upload' }),
        h('button', { type: 'button', class: 'ghost', text: 'Download all (zip)', onclick: () => downloadZip(id) })),
      msg);
    upload.addEventListener('submit', async (e) => {
      e.preventDefault();
      const names = [];
      const dir = dirInput.value.trim().replace(/^\/+|\/+$/g, '');
      for (const f of fileInput.files) {
        const path = dir ? `${dir}/${f.name}` : f.name;
        const u = await apiJson(filesRoute(id, path), { method: 'PUT', headers: { 'content-type': 'application/octet-stream' }, body: f });
        if (!u.ok) { msg.className = 'msg'; msg.textContent = `${f.name}: ${errorText(u.body, u.status)}`; return; }
        names.push(u.body.path);
      }
      await showWorkspace(id);
      const m = $('#ws-upload .msg');
      if (m && names.length) { m.className = 'msg ok'; m.textContent = `Uploaded ${names.join(', ')}`; }
    });
    const tree = fileTree(r.body.files || []);
    clear(box, h('h2', {}, 'Workspace of ', h('code', { text: id })), upload,
      tree.length ? h('ul', { class: 'tree ws-tree' }, wsTree(id, tree, ''))
        : h('p', { class: 'muted', text: 'The workspace is empty.' }),
      r.body.truncated ? h('p', { class: 'muted', text: 'More entries are not shown.' }) : null);
  }
  function wsTree(id, children, prefix) {
    return children.map((c) => {
      const path = prefix + c.name;
      if (c.type === 'directory') return h('li', {}, h('details', { open: true }, h('summary', { text: `${c.name}/` }), h('ul', {}, wsTree(id, c.children || [], `${path}/`))));
      return h('li', { 'data-path': path }, `${c.name} `, c.size != null ? h('span', { class: 'muted', text: `${bytes(c.size)} ` }) : null,
        h('button', { type: 'button', class: 'ghost small', text: 'Download', 'aria-label': `Download ${path}`, onclick: () => save(api(filesRoute(id, path)), c.name) }));
    });
  }
  // The whole workspace as a zip: XAgent's route (the native surface has none).
  function downloadZip(id) {
    useCookie(id);
    save(api('/download_workspace', { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' }), 'workspace.zip');
  }
  async function save(answer, name) {
    const res = await answer;
    if (!res.ok) { let b = null; try { b = await res.json(); } catch { /* */ } clear($('#session-detail'), h('p', { class: 'msg', text: errorText(b, res.status) })); return; }
    const url = URL.createObjectURL(await res.blob());
    const a = h('a', { href: url, download: name });
    document.body.append(a); a.click(); a.remove();
    setTimeout(() => URL.revokeObjectURL(url), 60000);
  }

  // ---------- plugins: live states and hot-load events ----------
  const eventsLog = [];
  function pluginEvent(text, cls) {
    eventsLog.unshift({ at: new Date(), text, cls });
    eventsLog.length = Math.min(eventsLog.length, 200);
    if (S.view === 'plugins') renderEvents();
  }
  function renderEvents() {
    clear($('#events'), eventsLog.map((e) => h('li', { class: e.cls },
      h('time', { datetime: e.at.toISOString(), text: e.at.toLocaleTimeString('en-GB') }), e.text)));
  }
  let pluginTimer = 0;
  async function pollPlugins() {
    clearTimeout(pluginTimer);
    if (!S.signedIn && S.plugins) return;
    try {
      const r = await apiJson('/plugins');
      if (r.ok) {
        const next = new Map(r.body.plugins.map((p) => [p.name, p]));
        let changed = false;
        if (S.plugins) {
          for (const [name, p] of next) {
            const old = S.plugins.get(name);
            const why = p.error ? `: ${p.error}` : '';
            if (!old) { pluginEvent(`${name} appeared (${p.backend}): ${p.state}${why}`, p.state); changed = true; }
            else if (old.state !== p.state) { pluginEvent(`${name}: ${old.state} → ${p.state}${why}`, p.state); changed = true; }
            else if (old.version !== p.version) { pluginEvent(`${name} reloaded: version ${(p.version || '').slice(0, 12)}${p.tools.length ? ` (${p.tools.length} tools)` : ''}`, p.state); changed = true; }
            else if (old.error !== p.error && p.error) { pluginEvent(`${name}: ${p.error}`, 'failed'); changed = true; }
          }
          for (const name of S.plugins.keys()) if (!next.has(name)) { pluginEvent(`${name} removed`, 'removed'); changed = true; }
        } else {
          pluginEvent(`${next.size} plugins: ${[...next.values()].filter((p) => p.state === 'ready').length} ready`, 'ready');
        }
        S.plugins = next;
        if (changed) loadCatalog();
        if (S.view === 'plugins') renderPlugins();
      }
    } catch { /* server away: try again */ }
    const compiling = S.plugins && [...S.plugins.values()].some((p) => p.state === 'compiling');
    pluginTimer = setTimeout(pollPlugins, compiling || S.view === 'plugins' ? 1000 : 3000);
  }
  function pluginState(p) {
    const badge = h('span', { class: `badge ${p.state}`, text: p.state });
    if (p.state === 'compiling' && p.progress) {
      const pr = p.progress;
      return [badge, h('div', { class: 'muted', text: `${pr.phase || 'compiling'} ${fmt((pr.elapsed_ms || 0) / 1000)} s${pr.bytes ? `, ${bytes(pr.bytes)}` : ''}` })];
    }
    return [badge, p.error ? h('div', { class: 'reason', text: p.error }) : null];
  }
  function renderPlugins() {
    renderEvents();
    const tbody = $('#plugins-table tbody');
    const list = S.plugins ? [...S.plugins.values()].sort((a, b) => a.name.localeCompare(b.name)) : [];
    clear(tbody, list.map((p) => h('tr', { 'data-plugin': p.name, 'data-state': p.state },
      h('th', { scope: 'row', text: p.name }),
      h('td', { text: p.backend }),
      h('td', {}, pluginState(p)),
      h('td', { title: p.tools.join(', ') }, String(p.tools.length),
        p.held ? h('div', {}, h('span', { class: 'badge held', text: `${p.held} held` }),
          S.admin ? h('button', { type: 'button', class: 'ghost small review', text: 'Review', 'aria-label': `Review ${p.name}'s held tools`, onclick: () => reviewPins(p.name) }) : null) : null),
      h('td', { class: 'wide' }, p.version ? h('code', { text: p.version.slice(0, 12) }) : '–',
        p.compile_ms != null ? h('div', { class: 'muted', text: `${fmt(p.compile_ms)} ms (${p.source || 'compiled'})` }) : null),
      h('td', {}, S.admin ? deleteButton(p.name) : null))));
  }
  // Tools `[pins]` holds: the pinned and the new definition side by side,
  // approved one by one or all at once.
  async function reviewPins(name) {
    const r = await apiJson(`/plugins/${encodeURIComponent(name)}/changes`);
    let panel = $('#pins-panel');
    if (!panel) { panel = h('section', { id: 'pins-panel', class: 'box' }); $('#plugins-table').after(panel); }
    if (!r.ok) { clear(panel, h('p', { class: 'msg', text: errorText(r.body, r.status) })); return; }
    const approve = async (tools) => {
      const a = await apiJson(`/plugins/${encodeURIComponent(name)}/changes/approve`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(tools ? { tools } : {}) });
      pluginEvent(a.ok ? `${name}: approved ${a.body.approved.join(', ') || 'nothing'}` : `approve ${name}: ${errorText(a.body, a.status)}`, a.ok ? 'ready' : 'failed');
      await pollPlugins();
      reviewPins(name);
    };
    const side = (label, def) => h('div', {}, h('h4', { text: label }),
      def ? h('pre', { class: 'def', text: JSON.stringify(def, null, 2) }) : h('p', { class: 'muted', text: 'none: a new tool' }));
    const items = r.body.changes.map((c) => h('li', { 'data-held': c.tool_id },
      h('h3', {}, h('code', { text: c.tool_id }), ' ',
        h('button', { type: 'button', class: 'small', text: 'Approve', onclick: () => approve([c.tool_id]) })),
      h('div', { class: 'grid2' }, side('Pinned', c.pinned), side('Now', c.now))));
    clear(panel, h('h2', {}, 'Held tools of ', h('code', { text: name })),
      items.length ? [h('ul', { class: 'held-list' }, items),
        h('button', { type: 'button', class: 'approve-all', text: 'Approve all', onclick: () => approve(null) })]
        : h('p', { class: 'muted', text: 'Nothing is held.' }));
  }
  // A first click arms the delete for 4 s; kept by plugin name, so a table
  // re-rendered meanwhile (polling, events) keeps the pending confirmation.
  const armedUntil = new Map();
  function deleteButton(name) {
    const armed = () => (armedUntil.get(name) || 0) > Date.now();
    const b = h('button', { type: 'button', class: 'danger small', text: armed() ? 'Confirm delete' : 'Delete', 'aria-label': `Delete plugin ${name}` });
    b.addEventListener('click', async () => {
      if (!armed()) {
        armedUntil.set(name, Date.now() + 4000);
        b.textContent = 'Confirm delete';
        setTimeout(() => {
          if (armed()) return;
          armedUntil.delete(name);
          const now = document.querySelector(`button[aria-label="Delete plugin ${CSS.escape(name)}"]`);
          if (now && !now.disabled) now.textContent = 'Delete';
        }, 4000);
        return;
      }
      armedUntil.delete(name);
      b.disabled = true;
      const r = await apiJson(`/plugins/${encodeURIComponent(name)}`, { method: 'DELETE' });
      pluginEvent(r.ok ? `${name} deleted by you` : `delete ${name}: ${errorText(r.body, r.status)}`, r.ok ? 'removed' : 'failed');
      pollPlugins();
    });
    return b;
  }
  $('#plugin-upload').addEventListener('submit', async (e) => {
    e.preventDefault();
    const msg = $('#up-msg');
    const name = $('#up-name').value.trim();
    const wasm = $('#up-wasm').files[0];
    if (!name || !wasm) { msg.className = 'msg'; msg.textContent = 'A name and a component are needed.'; return; }
    const form = new FormData();
    form.append('component', wasm, wasm.name);
    if ($('#up-toml').files[0]) form.append('manifest', $('#up-toml').files[0]);
    msg.className = 'msg ok'; msg.textContent = `Uploading ${name}…`;
    const r = await apiJson(`/plugins/${encodeURIComponent(name)}`, { method: 'PUT', body: form });
    msg.className = r.ok ? 'msg ok' : 'msg';
    msg.textContent = r.ok ? `${name}: ${r.status === 201 ? 'added' : 'replaced'}, ${r.body?.state || 'loaded'}` : `${name}: ${errorText(r.body, r.status)} (HTTP ${r.status})`;
    pollPlugins();
  });

  let metricsTimer = 0;
  async function pollMetrics() {
    clearTimeout(metricsTimer);
    if (S.signedIn && document.visibilityState !== 'hidden') {
      try {
        const res = await api('/metrics');
        if (res.ok) {
          const now = Date.now();
          S.samples.push({ t: now, tools: parseMetrics(await res.text()) });
          while (S.samples.length && S.samples[0].t < now - WINDOW_MS) S.samples.shift();
          if (S.view === 'metrics') renderMetrics();
        }
      } catch { /* try again */ }
    }
    metricsTimer = setTimeout(pollMetrics, 2000);
  }
  $('#metrics-tool').addEventListener('change', renderMetrics);
  function renderMetrics() {
    const only = $('#metrics-tool').value;
    const since = S.samples[0]?.t;
    const series = { calls: [], errors: [], p50: [], p99: [], fuel: [], mem: [] };
    for (let i = 1; i < S.samples.length; i++) {
      const a = S.samples[i - 1]; const b = S.samples[i];
      const st = stats(sum(a.tools, only), sum(b.tools, only));
      const per = (b.t - a.t) / 1000;
      series.calls.push([b.t, st.calls / per]); series.errors.push([b.t, st.errors / per]);
      if (st.p50 != null) { series.p50.push([b.t, st.p50 * 1000]); series.p99.push([b.t, st.p99 * 1000]); }
      if (st.fuel != null) series.fuel.push([b.t, st.fuel]);
      if (st.mem != null) series.mem.push([b.t, st.mem]);
    }
    clear($('#charts'),
      chart('Calls and errors per second', [['calls', series.calls], ['errors', series.errors]], since),
      chart('Latency, ms (p50, p99)', [['p50', series.p50], ['p99', series.p99]], since),
      chart('Fuel per call (wasm)', [['fuel', series.fuel]], since),
      chart('Peak memory per call, MiB (wasm)', [['MiB', series.mem]], since));
    const first = S.samples[0]; const last = S.samples.at(-1);
    const tbody = $('#metrics-table tbody');
    if (!last) { clear(tbody); return; }
    const rows = Object.keys(last.tools).map((tool) => {
      const st = stats(S.samples.length > 1 ? first.tools[tool] || ZERO : ZERO, last.tools[tool]);
      return { tool, ...st };
    }).sort((x, y) => y.calls - x.calls || x.tool.localeCompare(y.tool));
    clear(tbody, rows.map((r) => h('tr', { 'data-tool': r.tool, class: r.tool === only ? 'sel' : null },
      h('th', { scope: 'row' }, h('button', { type: 'button', class: 'ghost small', text: r.tool, 'aria-label': `Chart ${r.tool}`,
        onclick: () => { $('#metrics-tool').value = r.tool; renderMetrics(); } })),
      h('td', { class: 'calls', text: fmt(r.calls, 0) }), h('td', { text: fmt(r.errors, 0) }),
      h('td', { text: r.p50 == null ? '–' : fmt(r.p50 * 1000, 2) }), h('td', { text: r.p99 == null ? '–' : fmt(r.p99 * 1000, 2) }),
      h('td', { class: 'wide', text: r.fuel == null ? '–' : fmt(r.fuel, 0) }), h('td', { class: 'wide', text: r.mem == null ? '–' : fmt(r.mem, 1) }))));
  }

  // ---------- start ----------
  (async () => {
    // No view until the token is checked (the header paints at once).
    const problem = await signIn(S.token);
    if (problem) {
      S.token = ''; store.removeItem('toolhost.token');
      showLogin(problem);
      route();
    } else {
      await enter();
    }
    pollMetrics();
  })();
})();
