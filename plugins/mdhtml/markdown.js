// A small Markdown to HTML converter (no dependencies), for the mdhtml tools.
//
// Blocks: ATX headings (`# ` .. `###### `), setext headings (`===` / `---`
// underlines), paragraphs, fenced code blocks (``` or ~~~, with a language),
// indented code blocks (4 spaces), block quotes (nested), unordered (`-`, `*`,
// `+`) and ordered (`1.` / `1)`) lists with nested items, thematic breaks
// (`---`, `***`, `___`).
// Inline: code spans, `**strong**` / `__strong__`, `*em*` / `_em_`,
// `~~strike~~`, links `[text](url "title")`, images `![alt](url)`, autolinks
// `<https://...>`, hard line breaks (two trailing spaces or a backslash),
// backslash escapes.
// Raw HTML in the input is escaped, never passed through, and link targets
// with a `javascript:`, `vbscript:` or `data:` (other than images) scheme are
// dropped, so the output is safe to embed.
//
// This is CommonMark-ish, not CommonMark: no reference links, tables, HTML
// blocks or lazy continuation lines.

const ESCAPES = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' };

/** Escape text for HTML (element content and quoted attributes). */
export function escapeHtml(text) {
  const s = String(text);
  return /[&<>"']/.test(s) ? s.replace(/[&<>"']/g, (c) => ESCAPES[c]) : s;
}

// A letter or digit, roughly: ASCII ones and non-ASCII outside the punctuation
// blocks. (The component's SpiderMonkey has no ICU: no Unicode property escapes
// in regular expressions, no String.prototype.normalize, no Intl.)
const WORD_CHAR = /[A-Za-z0-9\u00AA\u00B5\u00BA\u00C0-\u00D6\u00D8-\u00F6\u00F8-\u1FFF\u2070-\u2DFF\u2E80-\u2FFF\u3040-\uD7FF\uF900-\uFDFF\uFE70-\uFEFF\uFF10-\uFF19\uFF21-\uFF3A\uFF41-\uFF5A\uFF66-\uFFDC]/;

/** A heading's slug for its id: lowercase words joined by `-` (non-ASCII letters kept). */
export function slugify(text) {
  const slug = [...String(text).toLowerCase()]
    .map((c) => (WORD_CHAR.test(c) || c === '_' || c === '-' ? c : /\s/.test(c) ? ' ' : ''))
    .join('')
    .trim()
    .replace(/[\s-]+/g, '-');
  return slug || 'section';
}

const UNSAFE_URL = /^\s*(javascript|vbscript|data|file):/i;
const SAFE_IMAGE_DATA = /^\s*data:image\/(png|gif|jpeg|webp);/i;

function safeUrl(url, image = false) {
  if (UNSAFE_URL.test(url) && !(image && SAFE_IMAGE_DATA.test(url))) return null;
  return url;
}

// ------------------------------------------------------------------- inline

const PUNCT = '!"#$%&\'()*+,-./:;<=>?@[\\]^_`{|}~';
// Bounds that keep pathological input (thousands of unclosed `*` or `[`) linear.
const MAX_SCAN = 20000; // characters an emphasis may span
const MAX_LABEL = 1000; // characters a link label may span
const MAX_CLOSERS = 16; // candidate closing delimiters tried per opener
function isSpace(c) {
  return c === ' ' || c === '\n' || c === '\t' || c === '\r' || c === '\f' || c === '\v' || c === '\u00a0';
}

// Where markup may start; the text between is copied in one piece.
const SPECIAL = / {2,}\n|[\\`<[!*_~]/g;

/** Inline markdown of one block's text to HTML. */
export function renderInline(src) {
  let out = '';
  let i = 0;
  let text = '';
  let linkClose = -2; // the next "](" at or after i (-1: none): links need one
  const scan = scanState(src);
  const flush = () => {
    out += escapeHtml(text);
    text = '';
  };
  while (i < src.length) {
    SPECIAL.lastIndex = i;
    const next = SPECIAL.exec(src);
    const stop = next ? next.index : src.length;
    if (stop > i) {
      text += src.slice(i, stop);
      i = stop;
      if (i >= src.length) break;
    }
    const c = src[i];
    // Backslash escapes and hard breaks.
    if (c === '\\') {
      const n = src[i + 1];
      if (n === '\n') {
        flush();
        out += '<br />\n';
        i += 2;
        continue;
      }
      if (n !== undefined && PUNCT.includes(n)) {
        text += n;
        i += 2;
        continue;
      }
    }
    // Two or more trailing spaces before a newline: hard break.
    if (c === ' ') {
      const m = /^ {2,}\n/.exec(src.slice(i));
      if (m) {
        flush();
        out += '<br />\n';
        i += m[0].length;
        continue;
      }
    }
    // Code spans: a run of backticks closed by the same run.
    if (c === '`') {
      const run = /^`+/.exec(src.slice(i))[0];
      const close = src.indexOf(run, i + run.length);
      let end = close;
      while (end !== -1 && src[end + run.length] === '`') end = src.indexOf(run, end + run.length + 1);
      if (end !== -1) {
        let code = src.slice(i + run.length, end).replace(/\n/g, ' ');
        if (/^ .*[^ ].* $/.test(code)) code = code.slice(1, -1);
        flush();
        out += `<code>${escapeHtml(code)}</code>`;
        i = end + run.length;
        continue;
      }
      text += run;
      i += run.length;
      continue;
    }
    // Autolinks: <https://example.com>, <me@example.com>.
    if (c === '<') {
      const m = /^<([a-zA-Z][a-zA-Z0-9+.-]{1,31}:[^\s<>]*)>/.exec(src.slice(i)) ||
        /^<([^\s<>@]+@[^\s<>@]+\.[^\s<>@]+)>/.exec(src.slice(i));
      if (m) {
        const isMail = !m[1].includes(':');
        const href = isMail ? `mailto:${m[1]}` : safeUrl(m[1]);
        flush();
        out += href === null ? escapeHtml(m[1]) : `<a href="${escapeHtml(href)}">${escapeHtml(m[1])}</a>`;
        i += m[0].length;
        continue;
      }
    }
    // Links and images.
    if (c === '[' || (c === '!' && src[i + 1] === '[')) {
      const image = c === '!';
      if (linkClose !== -1 && linkClose < i) linkClose = src.indexOf('](', i);
      const link = linkClose !== -1 && linkClose - i <= MAX_LABEL ? parseLink(src, image ? i + 1 : i) : null;
      if (link) {
        flush();
        const href = safeUrl(link.url, image);
        const title = link.title === undefined ? '' : ` title="${escapeHtml(link.title)}"`;
        if (image) {
          const alt = escapeHtml(stripInline(link.label));
          out += href === null ? alt : `<img src="${escapeHtml(href)}" alt="${alt}"${title} />`;
        } else {
          const inner = renderInline(link.label);
          out += href === null ? inner : `<a href="${escapeHtml(href)}"${title}>${inner}</a>`;
        }
        i = link.end;
        continue;
      }
    }
    // Emphasis: ** __ ~~ (strong, strike), * _ (em).
    if (c === '*' || c === '_' || c === '~') {
      const span = parseEmphasis(src, i, scan);
      if (span) {
        flush();
        out += `<${span.tag}>${renderInline(span.inner)}</${span.tag}>`;
        i = span.end;
        continue;
      }
    }
    text += c;
    i += 1;
  }
  flush();
  return out;
}

function parseLink(src, start) {
  // [label](url "title") with balanced brackets in the label (of bounded length).
  let depth = 0;
  let j = start;
  const limit = Math.min(src.length, start + MAX_LABEL);
  for (; j < limit; j++) {
    if (src[j] === '\\') {
      j++;
      continue;
    }
    if (src[j] === '`') {
      const run = /^`+/.exec(src.slice(j))[0];
      const close = src.indexOf(run, j + run.length);
      if (close !== -1) j = close + run.length - 1;
      continue;
    }
    if (src[j] === '[') depth++;
    else if (src[j] === ']' && --depth === 0) break;
  }
  if (j >= limit || src[j + 1] !== '(') return null;
  const label = src.slice(start + 1, j);
  const m = /^\(\s*(<[^<>\n]*>|[^\s()]*(?:\([^\s()]*\)[^\s()]*)*)(?:\s+("(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'))?\s*\)/.exec(src.slice(j + 1));
  if (!m) return null;
  let url = m[1];
  if (url.startsWith('<')) url = url.slice(1, -1);
  url = url.replace(/\\([!-/:-@[-`{-~])/g, '$1');
  const title = m[2] === undefined ? undefined : m[2].slice(1, -1).replace(/\\(.)/g, '$1');
  return { label, url, title, end: j + 1 + m[0].length };
}

// What emphasis parsing of one inline text remembers between openers, so that
// thousands of unclosed openers cost linear time, not quadratic:
// `noCloser`: per delimiter, the position before which earlier openers found
// only delimiters that cannot close (that does not depend on the opener);
// `nextTick(pos)`: the first backtick at or after pos (-1: none), from the
// positions found once (indexOf per opener would rescan the rest of the text).
function scanState(src) {
  let ticks = null;
  return {
    noCloser: new Map(),
    nextTick(pos) {
      if (ticks === null) {
        ticks = [];
        for (let k = src.indexOf('`'); k !== -1; k = src.indexOf('`', k + 1)) ticks.push(k);
      }
      let lo = 0;
      let hi = ticks.length;
      while (lo < hi) {
        const mid = (lo + hi) >> 1;
        if (ticks[mid] < pos) lo = mid + 1;
        else hi = mid;
      }
      return lo < ticks.length ? ticks[lo] : -1;
    },
  };
}

function parseEmphasis(src, i, scan = scanState(src)) {
  const { noCloser } = scan;
  const c = src[i];
  const double = src[i + 1] === c;
  if (c === '~' && !double) return null;
  const candidates = double ? [2, 1] : [1];
  for (const n of candidates) {
    if (c === '~' && n === 1) continue;
    const delim = c.repeat(n);
    const after = src[i + n];
    if (after === undefined || isSpace(after)) continue;
    // `_` inside a word is not emphasis (snake_case).
    if (c === '_' && i > 0 && WORD_CHAR.test(src[i - 1])) return null;
    let j = Math.max(i + n, noCloser.get(delim) ?? 0);
    let tries = 0;
    let spans = false; // a code span was skipped: the memo would not hold
    let tick = -2; // the next backtick at or after j (-1: none; -2: not looked up)
    while (j < src.length && tries++ < MAX_CLOSERS) {
      const k = src.indexOf(delim, j);
      if (k === -1) {
        j = src.length; // none left: no later opener of this kind closes either
        break;
      }
      if (k - i > MAX_SCAN) break;
      // Skip code spans and escaped delimiters inside.
      if (tick !== -1 && tick < j) tick = scan.nextTick(j);
      if (tick !== -1 && tick < k) {
        const run = /^`+/.exec(src.slice(tick))[0];
        const close = src.indexOf(run, tick + run.length);
        if (close !== -1 && close > k) {
          j = close + run.length;
          spans = true;
          continue;
        }
      }
      if (src[k - 1] === '\\') {
        j = k + 1;
        continue;
      }
      if (n === 2) {
        // In a run of three or more (`***`), the strong closer is its last two.
        let end = k;
        while (src[end + n] === c) end++;
        if (end !== k && !isSpace(src[k - 1])) {
          return { tag: c === '~' ? 'del' : 'strong', inner: src.slice(i + n, end), end: end + n };
        }
      }
      const closesRun = src[k + n] === c && n === 1; // `*a**` : not our single closer
      const before = src[k - 1];
      const next = src[k + n];
      if (k > i + n && !isSpace(before) && !closesRun &&
        !(c === '_' && next !== undefined && WORD_CHAR.test(next))) {
        const tag = c === '~' ? 'del' : n === 2 ? 'strong' : 'em';
        return { tag, inner: src.slice(i + n, k), end: k + n };
      }
      j = k + (closesRun ? 2 : 1);
    }
    if (!spans) noCloser.set(delim, j);
  }
  return null;
}

/** Inline markdown reduced to its plain text (for alt text, heading titles). */
export function stripInline(src) {
  return renderInline(src)
    .replace(/<[^>]*>/g, '')
    .replace(/&lt;/g, '<')
    .replace(/&gt;/g, '>')
    .replace(/&quot;/g, '"')
    .replace(/&#39;/g, "'")
    .replace(/&amp;/g, '&');
}

// ------------------------------------------------------------------- blocks

const ATX = /^ {0,3}(#{1,6})(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*$/;
const FENCE = /^( {0,3})(`{3,}|~{3,})[ \t]*([^`\s]*)[^`]*$/;
const HR = /^ {0,3}([-*_])(?:[ \t]*\1){2,}[ \t]*$/;
const BULLET = /^( {0,3})([-*+])(?:[ \t]+(.*))?$/;
const ORDERED = /^( {0,3})(\d{1,9})([.)])(?:[ \t]+(.*))?$/;
const QUOTE = /^ {0,3}> ?(.*)$/;
const SETEXT = /^ {0,3}(=+|-+)[ \t]*$/;
const BLANK = /^[ \t]*$/;

function expandTabs(line) {
  if (!line.includes('\t')) return line;
  let out = '';
  for (const ch of line) {
    if (ch === '\t') out += ' '.repeat(4 - (out.length % 4));
    else out += ch;
  }
  return out;
}

/**
 * Parse markdown into a block tree:
 * {type: 'heading', level, text} | {type: 'paragraph', text} | {type: 'code', lang, text}
 * | {type: 'hr'} | {type: 'quote', children} | {type: 'list', ordered, start, tight, items: [children]}.
 */
export function parseBlocks(markdown) {
  const lines = String(markdown).replace(/\r\n?/g, '\n').split('\n').map(expandTabs);
  return parseLines(lines, 0);
}

function parseLines(lines, depth) {
  if (depth > 64) {
    return [{ type: 'paragraph', text: lines.join('\n') }]; // nesting bomb: stop structuring
  }
  const blocks = [];
  let i = 0;
  let para = [];
  const endPara = () => {
    if (para.length) blocks.push({ type: 'paragraph', text: para.join('\n').trim() });
    para = [];
  };
  while (i < lines.length) {
    const line = lines[i];
    // The first non-space character decides which block rules can apply.
    const ind = /^ */.exec(line)[0].length;
    const ch = ind < 4 ? line[ind] : ' ';
    if (ch === undefined || (ind < 4 && BLANK.test(line))) {
      endPara();
      i++;
      continue;
    }
    if (ind >= 4 && BLANK.test(line)) {
      endPara();
      i++;
      continue;
    }
    // Setext heading: a paragraph line underlined with === or ---.
    if (para.length && (ch === '=' || ch === '-') && SETEXT.test(line)) {
      const level = line.trim()[0] === '=' ? 1 : 2;
      blocks.push({ type: 'heading', level, text: para.join('\n').trim() });
      para = [];
      i++;
      continue;
    }
    let m;
    if (ch === '#' && (m = ATX.exec(line))) {
      endPara();
      blocks.push({ type: 'heading', level: m[1].length, text: (m[2] || '').trim() });
      i++;
      continue;
    }
    if ((ch === '-' || ch === '*' || ch === '_') && HR.test(line)) {
      endPara();
      blocks.push({ type: 'hr' });
      i++;
      continue;
    }
    if ((ch === '`' || ch === '~') && (m = FENCE.exec(line)) && !(m[2][0] === '`' && line.slice(m[1].length + m[2].length).includes('`'))) {
      endPara();
      const indent = m[1].length;
      const fence = m[2];
      const body = [];
      i++;
      while (i < lines.length) {
        const l = lines[i];
        const close = new RegExp(`^ {0,3}${fence[0] === '`' ? '`' : '~'}{${fence.length},}[ \\t]*$`);
        if (close.test(l)) {
          i++;
          break;
        }
        body.push(l.replace(new RegExp(`^ {0,${indent}}`), ''));
        i++;
      }
      blocks.push({ type: 'code', lang: m[3] || undefined, text: body.length ? `${body.join('\n')}\n` : '' });
      continue;
    }
    // Indented code (not inside a paragraph).
    if (!para.length && ind >= 4) {
      const body = [];
      while (i < lines.length && (/^ {4}/.test(lines[i]) || BLANK.test(lines[i]))) {
        body.push(lines[i].slice(4));
        i++;
      }
      while (body.length && BLANK.test(body[body.length - 1])) body.pop();
      blocks.push({ type: 'code', lang: undefined, text: `${body.join('\n')}\n` });
      continue;
    }
    if (ch === '>') {
      endPara();
      const inner = [];
      while (i < lines.length && (m = QUOTE.exec(lines[i]))) {
        inner.push(m[1]);
        i++;
      }
      blocks.push({ type: 'quote', children: parseLines(inner, depth + 1) });
      continue;
    }
    const bullet = ch === '-' || ch === '*' || ch === '+' ? BULLET.exec(line) : null;
    const ordered = !bullet && ch >= '0' && ch <= '9' ? ORDERED.exec(line) : null;
    // An ordered list interrupts a paragraph only when it starts at 1.
    if ((bullet || ordered) && !(para.length && ordered && ordered[2] !== '1') && !(para.length && !(bullet ? bullet[3] : ordered[4]))) {
      endPara();
      const list = parseList(lines, i, depth);
      blocks.push(list.block);
      i = list.end;
      continue;
    }
    para.push(line);
    i++;
  }
  endPara();
  return blocks;
}

function listMarker(line) {
  let m = BULLET.exec(line);
  if (m) {
    const content = m[3] ?? '';
    const width = m[1].length + 1 + (m[3] === undefined ? 1 : line.length - m[1].length - 1 - content.length);
    return { ordered: false, marker: m[2], content, width: Math.min(width, m[1].length + 5) };
  }
  m = ORDERED.exec(line);
  if (m) {
    const content = m[4] ?? '';
    const lead = m[1].length + m[2].length + 1;
    const width = lead + (m[4] === undefined ? 1 : line.length - lead - content.length);
    return { ordered: true, marker: m[3], start: Number(m[2]), content, width: Math.min(width, lead + 4) };
  }
  return null;
}

function parseList(lines, i, depth) {
  const first = listMarker(lines[i]);
  const items = [];
  let tight = true;
  let sawBlank = false;
  while (i < lines.length) {
    const mk = listMarker(lines[i]);
    if (!mk || mk.ordered !== first.ordered || mk.marker !== first.marker || HR.test(lines[i])) break;
    if (sawBlank) tight = false;
    const body = [mk.content];
    i++;
    let blankInside = false;
    while (i < lines.length) {
      const l = lines[i];
      if (BLANK.test(l)) {
        body.push('');
        i++;
        continue;
      }
      const indent = /^ */.exec(l)[0].length;
      if (indent >= mk.width) {
        if (body.length && body[body.length - 1] === '') blankInside = true;
        body.push(l.slice(mk.width));
        i++;
        continue;
      }
      // A lazy continuation of the item's paragraph.
      if (body[body.length - 1] !== '' && !listMarker(l) && !ATX.test(l) && !HR.test(l) && !QUOTE.test(l) && !FENCE.test(l)) {
        body.push(l.trim());
        i++;
        continue;
      }
      break;
    }
    sawBlank = false;
    while (body.length && body[body.length - 1] === '') {
      body.pop();
      sawBlank = true;
    }
    if (blankInside) tight = false;
    items.push(parseLines(body, depth + 1));
  }
  return {
    block: { type: 'list', ordered: first.ordered, start: first.start ?? 1, tight, items },
    end: i,
  };
}

// ------------------------------------------------------------------- render

/**
 * Markdown to HTML.
 *
 * Options: `headingIds` (default true): give headings `id`s from their text
 * (unique: `intro`, `intro-1`, ...); `headingOffset` (0-5): add to every
 * heading level (capped at 6).
 */
export function renderHtml(markdown, { headingIds = true, headingOffset = 0 } = {}) {
  const slugs = new Map();
  const ctx = { headingIds, headingOffset, slugs };
  return renderBlocks(parseBlocks(markdown), ctx, false);
}

function uniqueSlug(slugs, text) {
  const base = slugify(text);
  const n = slugs.get(base) ?? 0;
  slugs.set(base, n + 1);
  return n === 0 ? base : `${base}-${n}`;
}

function renderBlocks(blocks, ctx, tight) {
  return blocks.map((b) => renderBlock(b, ctx, tight)).join('');
}

function renderBlock(b, ctx, tight) {
  switch (b.type) {
    case 'heading': {
      const level = Math.min(6, b.level + ctx.headingOffset);
      const id = ctx.headingIds ? ` id="${escapeHtml(uniqueSlug(ctx.slugs, stripInline(b.text)))}"` : '';
      return `<h${level}${id}>${renderInline(b.text)}</h${level}>\n`;
    }
    case 'paragraph':
      return tight ? `${renderInline(b.text)}\n` : `<p>${renderInline(b.text)}</p>\n`;
    case 'code': {
      const cls = b.lang ? ` class="language-${escapeHtml(b.lang)}"` : '';
      return `<pre><code${cls}>${escapeHtml(b.text)}</code></pre>\n`;
    }
    case 'hr':
      return '<hr />\n';
    case 'quote':
      return `<blockquote>\n${renderBlocks(b.children, ctx, false)}</blockquote>\n`;
    case 'list': {
      const tag = b.ordered ? 'ol' : 'ul';
      const start = b.ordered && b.start !== 1 ? ` start="${b.start}"` : '';
      const items = b.items
        .map((children) => {
          const inner = renderBlocks(children, ctx, b.tight);
          return `<li>${b.tight ? inner.replace(/\n$/, '') : `\n${inner}`}</li>\n`;
        })
        .join('');
      return `<${tag}${start}>\n${items}</${tag}>\n`;
    }
    default:
      return '';
  }
}

/**
 * The headings of a document, in order: [{level, text, id}] (`text` is plain,
 * `id` the one `renderHtml` gives the heading).
 */
export function headings(markdown) {
  const slugs = new Map();
  const out = [];
  const walk = (blocks) => {
    for (const b of blocks) {
      if (b.type === 'heading') {
        const text = stripInline(b.text);
        out.push({ level: b.level, text, id: uniqueSlug(slugs, text) });
      } else if (b.type === 'quote') walk(b.children);
      else if (b.type === 'list') b.items.forEach(walk);
    }
  };
  walk(parseBlocks(markdown));
  return out;
}
