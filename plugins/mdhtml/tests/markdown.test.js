// Tests of the converter on plain node:  node --test plugins/mdhtml/tests/
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { renderHtml, renderInline, headings, slugify, escapeHtml, parseBlocks } from '../markdown.js';

const html = (md, opts) => renderHtml(md, opts);

test('headings: ATX, setext, ids, offset', () => {
  assert.equal(html('# Hi'), '<h1 id="hi">Hi</h1>\n');
  assert.equal(html('###### Six ###'), '<h6 id="six">Six</h6>\n');
  assert.equal(html('####### seven'), '<p>####### seven</p>\n');
  assert.equal(html('#nospace'), '<p>#nospace</p>\n');
  assert.equal(html('Title\n====='), '<h1 id="title">Title</h1>\n');
  assert.equal(html('Sub\n---'), '<h2 id="sub">Sub</h2>\n');
  assert.equal(html('# A\n# A\n# A'), '<h1 id="a">A</h1>\n<h1 id="a-1">A</h1>\n<h1 id="a-2">A</h1>\n');
  assert.equal(html('# Hi', { headingIds: false }), '<h1>Hi</h1>\n');
  assert.equal(html('# Hi\n##### Deep', { headingOffset: 2 }), '<h3 id="hi">Hi</h3>\n<h6 id="deep">Deep</h6>\n');
  assert.equal(html('## *Emph* `code`'), '<h2 id="emph-code"><em>Emph</em> <code>code</code></h2>\n');
});

test('paragraphs and line breaks', () => {
  assert.equal(html('one\ntwo\n\nthree'), '<p>one\ntwo</p>\n<p>three</p>\n');
  assert.equal(html('hard  \nbreak'), '<p>hard<br />\nbreak</p>\n');
  assert.equal(html('back\\\nslash'), '<p>back<br />\nslash</p>\n');
  assert.equal(html(''), '');
  assert.equal(html('\n\n  \n'), '');
  assert.equal(html('a\r\nb'), '<p>a\nb</p>\n');
});

test('emphasis, strong, strike', () => {
  assert.equal(renderInline('*a* _b_ **c** __d__ ~~e~~'), '<em>a</em> <em>b</em> <strong>c</strong> <strong>d</strong> <del>e</del>');
  assert.equal(renderInline('**bold *and em***'), '<strong>bold <em>and em</em></strong>');
  assert.equal(renderInline('snake_case_name'), 'snake_case_name');
  assert.equal(renderInline('2 * 3 * 4'), '2 * 3 * 4');
  assert.equal(renderInline('*not closed'), '*not closed');
  assert.equal(renderInline('\\*literal\\*'), '*literal*');
  assert.equal(renderInline('~single~'), '~single~');
  assert.equal(renderInline('***both***'), '<strong><em>both</em></strong>');
});

test('code spans and blocks', () => {
  assert.equal(renderInline('`a < b`'), '<code>a &lt; b</code>');
  assert.equal(renderInline('`` a ` b ``'), '<code>a ` b</code>');
  assert.equal(renderInline('`*no em*`'), '<code>*no em*</code>');
  assert.equal(renderInline('`unclosed'), '`unclosed');
  assert.equal(html('```js\nlet a = "<x>";\n```'), '<pre><code class="language-js">let a = &quot;&lt;x&gt;&quot;;\n</code></pre>\n');
  assert.equal(html('~~~\n# not a heading\n~~~'), '<pre><code># not a heading\n</code></pre>\n');
  assert.equal(html('```\nunclosed'), '<pre><code>unclosed\n</code></pre>\n');
  assert.equal(html('    indented\n    code\n\nafter'), '<pre><code>indented\ncode\n</code></pre>\n<p>after</p>\n');
  assert.equal(html('```"><script>\nx\n```'), '<pre><code class="language-&quot;&gt;&lt;script&gt;">x\n</code></pre>\n');
});

test('lists: bullets, ordered, nested, loose', () => {
  assert.equal(html('- a\n- b'), '<ul>\n<li>a</li>\n<li>b</li>\n</ul>\n');
  assert.equal(html('* a\n+ b'), '<ul>\n<li>a</li>\n</ul>\n<ul>\n<li>b</li>\n</ul>\n');
  assert.equal(html('1. a\n2. b'), '<ol>\n<li>a</li>\n<li>b</li>\n</ol>\n');
  assert.equal(html('3) a\n4) b'), '<ol start="3">\n<li>a</li>\n<li>b</li>\n</ol>\n');
  assert.equal(html('- a\n  - b\n  - c\n- d'), '<ul>\n<li>a\n<ul>\n<li>b</li>\n<li>c</li>\n</ul></li>\n<li>d</li>\n</ul>\n');
  assert.equal(html('- a\n\n- b'), '<ul>\n<li>\n<p>a</p>\n</li>\n<li>\n<p>b</p>\n</li>\n</ul>\n');
  assert.equal(html('- a\nlazy'), '<ul>\n<li>a\nlazy</li>\n</ul>\n');
  assert.equal(html('text\n2. not a list'), '<p>text\n2. not a list</p>\n');
  assert.equal(html('- **b** `c`'), '<ul>\n<li><strong>b</strong> <code>c</code></li>\n</ul>\n');
});

test('block quotes and rules', () => {
  assert.equal(html('> a\n> b'), '<blockquote>\n<p>a\nb</p>\n</blockquote>\n');
  assert.equal(html('> # H\n> > deeper'), '<blockquote>\n<h1 id="h">H</h1>\n<blockquote>\n<p>deeper</p>\n</blockquote>\n</blockquote>\n');
  assert.equal(html('---'), '<hr />\n');
  assert.equal(html('* * *'), '<hr />\n');
  assert.equal(html('a\n\n___\n\nb'), '<p>a</p>\n<hr />\n<p>b</p>\n');
});

test('links and images, unsafe schemes dropped', () => {
  assert.equal(renderInline('[a](https://x.y)'), '<a href="https://x.y">a</a>');
  assert.equal(renderInline('[a *b*](/p "T \\"q\\"")'), '<a href="/p" title="T &quot;q&quot;"><em>b</em></a>'.replace('<em>b', 'a <em>b'));
  assert.equal(renderInline('![alt *x*](i.png)'), '<img src="i.png" alt="alt x" />');
  assert.equal(renderInline('[x](javascript:alert(1))'), 'x');
  assert.equal(renderInline('[x]( JAVASCRIPT:alert(1))'), 'x');
  assert.equal(renderInline('![x](data:text/html;base64,AA)'), 'x');
  assert.equal(renderInline('![x](data:image/png;base64,AA)'), '<img src="data:image/png;base64,AA" alt="x" />');
  assert.equal(renderInline('[a](<with space>)'), '<a href="with space">a</a>');
  assert.equal(renderInline('[a](x"onmouseover="y)'), '<a href="x&quot;onmouseover=&quot;y">a</a>');
  assert.equal(renderInline('[not a link] (x)'), '[not a link] (x)');
  assert.equal(renderInline('<https://a.b/c?d=1&e=2>'), '<a href="https://a.b/c?d=1&amp;e=2">https://a.b/c?d=1&amp;e=2</a>');
  assert.equal(renderInline('<me@example.com>'), '<a href="mailto:me@example.com">me@example.com</a>');
  assert.equal(renderInline('<javascript:alert(1)>'), 'javascript:alert(1)');
});

test('raw HTML is escaped', () => {
  assert.equal(html('<script>alert(1)</script>'), '<p>&lt;script&gt;alert(1)&lt;/script&gt;</p>\n');
  assert.equal(html('<img src=x onerror=alert(1)>'), '<p>&lt;img src=x onerror=alert(1)&gt;</p>\n');
  assert.equal(escapeHtml(`&<>"'`), '&amp;&lt;&gt;&quot;&#39;');
  assert.equal(escapeHtml('plain'), 'plain');
});

test('headings() outline and slugs', () => {
  assert.deepEqual(headings('# A *b*\ntext\n## A b\n> ### Quoted\n- #### In list'), [
    { level: 1, text: 'A b', id: 'a-b' },
    { level: 2, text: 'A b', id: 'a-b-1' },
    { level: 3, text: 'Quoted', id: 'quoted' },
    { level: 4, text: 'In list', id: 'in-list' },
  ]);
  assert.equal(slugify('Héllo, Wörld! 2'), 'héllo-wörld-2');
  assert.equal(slugify('C++ & Rust -- fast'), 'c-rust-fast');
  assert.equal(slugify('!!!'), 'section');
  // The ids headings() reports are the ones renderHtml() gives.
  const md = '# X\n## X\n- ## X';
  const ids = headings(md).map((h) => h.id);
  assert.deepEqual([...html(md).matchAll(/id="([^"]+)"/g)].map((m) => m[1]), ids);
});

test('pathological input stays bounded', () => {
  const deep = '>'.repeat(5000) + ' x';
  assert.match(html(deep), /x/);
  const nested = Array.from({ length: 300 }, (_, i) => `${'  '.repeat(i)}- ${i}`).join('\n');
  assert.match(html(nested), /299/);
  const stars = '*a '.repeat(3000);
  const t = Date.now();
  renderInline(stars);
  renderInline('['.repeat(3000));
  renderInline('`'.repeat(3000));
  assert.ok(Date.now() - t < 5000);
  assert.ok(parseBlocks('x'.repeat(100000)).length === 1);
});

test('unclosed delimiters by the thousand stay fast', () => {
  const t = Date.now();
  renderInline('*a '.repeat(50000));
  renderInline('[a '.repeat(50000));
  renderInline('_a '.repeat(50000));
  renderInline('~~a '.repeat(50000));
  assert.ok(Date.now() - t < 3000, `${Date.now() - t} ms`);
});
