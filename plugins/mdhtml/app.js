// mdhtml: Markdown to HTML, and a document's outline. A JavaScript plugin:
// build it with `sdk/js/build.sh plugins/mdhtml <plugins dir>`.
//
// The converter (markdown.js) is written here, with no dependencies: see its
// header for the supported syntax. Raw HTML in the input is escaped, and
// `javascript:` / `data:` links are dropped, so the HTML is safe to embed.
import { tool, json, text, ToolError, host } from 'toolhost-sdk';
import { renderHtml, headings, escapeHtml } from './markdown.js';

const MAX_INPUT_CHARS = 500_000;

function checkSize(markdown) {
  if (markdown.length > MAX_INPUT_CHARS) {
    throw ToolError.invalidInput(`the markdown is ${markdown.length} characters; at most ${MAX_INPUT_CHARS} are converted`);
  }
}

tool(
  {
    name: 'render',
    description:
      'Convert Markdown to HTML: headings (with ids), paragraphs, emphasis, code spans and blocks, ' +
      'lists, block quotes, links and images. Raw HTML in the input is escaped, so the output is safe to embed.',
    input: {
      type: 'object',
      properties: {
        markdown: { type: 'string', description: 'The Markdown text.' },
        heading_ids: {
          type: 'boolean',
          default: true,
          description: 'Give each heading an id derived from its text (for links to #sections).',
        },
        heading_offset: {
          type: 'integer',
          minimum: 0,
          maximum: 5,
          default: 0,
          description: 'Add this to every heading level, e.g. 1 to turn # into <h2> when embedding.',
        },
        full_document: {
          type: 'boolean',
          default: false,
          description: 'Wrap the HTML in a complete <!DOCTYPE html> document titled after the first heading.',
        },
      },
      required: ['markdown'],
      additionalProperties: false,
    },
  },
  ({ markdown, heading_ids, heading_offset, full_document }) => {
    checkSize(markdown);
    const body = renderHtml(markdown, { headingIds: heading_ids, headingOffset: heading_offset });
    host.log('debug', `rendered ${markdown.length} characters of markdown into ${body.length} of HTML`);
    if (!full_document) return body;
    const title = headings(markdown)[0]?.text ?? host.config('default_title', 'Document');
    return text(
      `<!DOCTYPE html>\n<html>\n<head>\n<meta charset="utf-8" />\n<title>${escapeHtml(title)}</title>\n</head>\n<body>\n${body}</body>\n</html>\n`,
    );
  },
);

tool(
  {
    name: 'toc',
    description:
      "A Markdown document's outline: its headings in order with their level, plain text and the id " +
      'that mdhtml_render gives them; optionally a nested Markdown table of contents linking to them.',
    input: {
      type: 'object',
      properties: {
        markdown: { type: 'string', description: 'The Markdown text.' },
        max_level: {
          type: 'integer',
          minimum: 1,
          maximum: 6,
          default: 6,
          description: 'Leave out headings deeper than this level.',
        },
        as_markdown: {
          type: 'boolean',
          default: false,
          description: 'Also return the table of contents as a nested Markdown list of links.',
        },
      },
      required: ['markdown'],
      additionalProperties: false,
    },
    output: {
      type: 'object',
      properties: {
        count: { type: 'integer' },
        headings: {
          type: 'array',
          items: {
            type: 'object',
            properties: {
              level: { type: 'integer', minimum: 1, maximum: 6 },
              text: { type: 'string' },
              id: { type: 'string' },
            },
            required: ['level', 'text', 'id'],
          },
        },
      },
      required: ['count', 'headings'],
    },
  },
  ({ markdown, max_level, as_markdown }) => {
    checkSize(markdown);
    const found = headings(markdown).filter((h) => h.level <= max_level);
    const outline = json({ count: found.length, headings: found });
    if (!as_markdown) return outline;
    const top = Math.min(...found.map((h) => h.level));
    const list = found
      .map((h) => `${'  '.repeat(h.level - top)}- [${h.text.replace(/([\\[\]])/g, '\\$1')}](#${h.id})`)
      .join('\n');
    return [outline, text(found.length ? `${list}\n` : '')];
  },
);
