// The toolhost JavaScript SDK, without the WIT import: `createSdk(hostImports)`
// builds the SDK around an object with the functions of the WIT interface
// `toolhost:plugin/host@0.1.0` as componentize-js binds them (`log(level,
// message)`, `reportProgress({message, done, total})`, `config(key)`).
// `toolhost-sdk.js` passes the real import; unit tests pass stubs.
//
// Plugins import from "toolhost-sdk" (see README.md), never from this file.

/** The WIT package this SDK speaks. */
export const WIT_PACKAGE = 'toolhost:plugin@0.1.0';
export const VERSION = '0.1.0';

const NAME = /^[A-Za-z0-9_-]{1,64}$/;
const LEVELS = ['trace', 'debug', 'info', 'warn', 'error'];
const MAX_ERROR_CHARS = 4000;
const MAX_STACK_LINES = 6;
// Frames of the SDK itself (and of componentize-js's generated bindings) are
// left out of the stack shown to agents.
const SDK_FRAME = /(?:toolhost-sdk|sdk\/js)\/(?:core|toolhost-sdk|entry|testing|run)\.js:\d|^export_[\w$]*@|\/sources\/initializer\.js:\d/;

/** A tool's own error: `ToolError.invalidInput(msg)` or `ToolError.failed(msg)`. */
export class ToolError extends Error {
  /**
   * @param {'invalid-input' | 'failed'} kind
   * @param {string} message
   */
  constructor(kind, message) {
    if (kind !== 'invalid-input' && kind !== 'failed') {
      throw new TypeError(`unknown ToolError kind ${JSON.stringify(kind)} (invalid-input or failed)`);
    }
    super(String(message));
    this.name = 'ToolError';
    this.kind = kind;
  }

  /** The input was wrong (the agent's fault): it may retry with other input. */
  static invalidInput(message) {
    return new ToolError('invalid-input', message);
  }

  /** The tool failed while running on valid input. */
  static failed(message) {
    return new ToolError('failed', message);
  }
}

/**
 * The error case of the export's `result<_, tool-error>`: componentize-js
 * lowers the own `payload` property of a thrown value as the `err` value (a
 * thrown Error without one is rethrown and traps the call).
 */
export class ComponentError extends Error {
  constructor(payload) {
    super(`${payload.tag}: ${payload.val}`);
    this.name = 'ComponentError';
    Object.defineProperty(this, 'payload', { value: payload, enumerable: true });
  }
}

/** One item of a tool's result: the WIT variant `content` ({tag, val}). */
export class Content {
  constructor(tag, val) {
    this.tag = tag;
    this.val = val;
    Object.freeze(this);
  }
}

function describe(value) {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'an array';
  return typeof value === 'object' ? 'an object' : `a ${typeof value}`;
}

function isPlainObject(value) {
  if (value === null || typeof value !== 'object' || Array.isArray(value)) return false;
  const proto = Object.getPrototypeOf(value);
  return proto === Object.prototype || proto === null;
}

/** JSON text of a value; NaN, infinities, BigInts, functions and cycles fail. */
function toJsonText(value) {
  let text;
  try {
    text = JSON.stringify(value, (key, v) => {
      if (typeof v === 'number' && !Number.isFinite(v)) {
        throw new TypeError(`${v} at ${key === '' ? 'the top' : JSON.stringify(key)} is not a JSON number`);
      }
      if (typeof v === 'bigint') throw new TypeError(`the BigInt ${v} is not JSON (convert it to a Number or a string)`);
      return v;
    });
  } catch (e) {
    throw ToolError.failed(`the result is not valid JSON: ${e && e.message ? e.message : e}`);
  }
  if (text === undefined) throw ToolError.failed(`the result is not valid JSON: ${describe(value)} has no JSON form`);
  return text;
}

/** Text content. A bare string returned by a tool is text too. */
export function text(value) {
  return new Content('text', String(value));
}

/** JSON content: `json({words: 12})`. Objects, arrays, numbers and booleans returned bare are JSON too. */
export function json(value) {
  return new Content('json', toJsonText(value));
}

function toBytes(data) {
  if (data instanceof Uint8Array) return data;
  if (data instanceof ArrayBuffer) return new Uint8Array(data);
  if (ArrayBuffer.isView(data)) return new Uint8Array(data.buffer, data.byteOffset, data.byteLength);
  if (Array.isArray(data)) {
    const bytes = new Uint8Array(data.length);
    data.forEach((b, i) => {
      if (!Number.isInteger(b) || b < 0 || b > 255) throw new TypeError(`byte ${i} (${b}) is not an integer 0-255`);
      bytes[i] = b;
    });
    return bytes;
  }
  if (typeof data === 'string') return new TextEncoder().encode(data);
  throw new TypeError(`binary data must be a Uint8Array, ArrayBuffer, typed array, array of bytes or string, not ${describe(data)}`);
}

/** Bytes with a media type: `binary("image/png", bytes, "chart.png")`. */
export function binary(mediaType, data, name) {
  if (typeof mediaType !== 'string' || !mediaType.includes('/')) {
    throw new TypeError(`binary(mediaType, data, name?): mediaType must be a media type like "image/png", not ${JSON.stringify(mediaType)}`);
  }
  return new Content('binary', {
    mediaType,
    data: toBytes(data),
    name: name === undefined || name === null ? undefined : String(name),
  });
}

function item(value) {
  if (value instanceof Content) return value;
  if (typeof value === 'string') return text(value);
  if (value instanceof Uint8Array || value instanceof ArrayBuffer) return binary('application/octet-stream', value);
  return json(value);
}

/** A tool's return value as a list of WIT content items. */
export function contents(value) {
  if (value === undefined || value === null) return [];
  if (Array.isArray(value) && value.some((v) => v instanceof Content)) return value.map(item);
  return [item(value)]; // a string, bytes, a Content, or a JSON value (arrays of plain values too)
}

/** A tool's failure as the text of a `failed` error: `Name: message` and a short stack. */
export function describeFailure(error) {
  let out;
  if (error instanceof Error || (error && typeof error === 'object' && typeof error.message === 'string' && 'stack' in error)) {
    const head = `${error.name || 'Error'}: ${error.message}`;
    const frames = String(error.stack || '')
      .split('\n')
      .map((l) => l.trim())
      .filter((l) => l && l !== head && !l.startsWith(`${head}`) && !SDK_FRAME.test(l));
    out = head;
    if (frames.length) {
      const shown = frames.slice(0, MAX_STACK_LINES);
      if (frames.length > shown.length) shown.push('...');
      out += `\n\nStack:\n  ${shown.join('\n  ')}`;
    }
    if (error.cause !== undefined) out += `\n\nCaused by: ${describeFailure(error.cause)}`;
  } else {
    let shown;
    try {
      shown = typeof error === 'string' ? JSON.stringify(error) : JSON.stringify(error) ?? String(error);
    } catch {
      shown = Object.prototype.toString.call(error);
    }
    out = `a non-Error value was thrown: ${shown}`;
  }
  if (out.length > MAX_ERROR_CHARS) out = `${out.slice(0, MAX_ERROR_CHARS - 16)}\n... (truncated)`;
  return out;
}

/**
 * Whether a caught value is the engine running out of memory: SpiderMonkey
 * throws the string "out of memory" (catchable) when the host refuses to grow
 * the linear memory. The call must then trap, not return a tool error, so that
 * the host reports `out_of_memory` against the plugin's limit. ("allocation
 * size overflow", an InternalError, is a size limit of the engine, e.g. a
 * string over 2^30 characters, and stays the tool's failure.)
 */
export function isOutOfMemory(error) {
  if (typeof error === 'string') return error === 'out of memory';
  return !!error && typeof error === 'object' && error.name === 'InternalError' && error.message === 'out of memory';
}

function checkSchema(schema, where) {
  if (!isPlainObject(schema)) throw new TypeError(`${where} must be a JSON Schema object, not ${describe(schema)}`);
  if (schema.type !== 'object') {
    throw new TypeError(`${where} must have "type": "object" (a tool's input is a JSON object), not ${JSON.stringify(schema.type)}`);
  }
  try {
    const text = JSON.stringify(schema);
    JSON.parse(text);
    return text;
  } catch (e) {
    throw new TypeError(`${where} is not JSON: ${e.message}`);
  }
}

/**
 * Build the SDK around the host imports.
 *
 * @param {{log: Function, reportProgress: Function, config: Function}} hostImports
 */
export function createSdk(hostImports) {
  /** @type {Map<string, {name: string, description: string, inputSchema: string, outputSchema?: string, schema: object, fn: Function}>} */
  const registry = new Map();

  /**
   * Register a tool: `tool({name, description, input, output}, fn)`.
   *
   * `input` is the JSON Schema of the input (an object schema; default: no
   * parameters), `output` an optional JSON Schema of a JSON result. `fn` gets
   * the parsed input object (top-level `default`s filled in) and returns (or
   * resolves to) a string, `json(v)`, `binary(...)`, `text(s)`, a plain JSON
   * value, `undefined` (no content) or an array of content items. Returns `fn`.
   */
  function tool(spec, fn) {
    if (!isPlainObject(spec)) throw new TypeError('tool(spec, fn): spec must be an object {name, description, input, output?}');
    const { name, description, input, output } = spec;
    const unknown = Object.keys(spec).filter((k) => !['name', 'description', 'input', 'output'].includes(k));
    if (unknown.length) {
      throw new TypeError(`tool ${JSON.stringify(name)}: unknown key(s) ${unknown.join(', ')} (name, description, input, output)`);
    }
    if (typeof name !== 'string' || !NAME.test(name)) {
      throw new TypeError(`tool name ${JSON.stringify(name)} must match [A-Za-z0-9_-]{1,64}`);
    }
    const where = `tool \`${name}\``;
    if (registry.has(name)) throw new TypeError(`two tools are named \`${name}\``);
    if (typeof fn !== 'function') throw new TypeError(`${where}: the second argument must be the tool's function`);
    if (typeof description !== 'string' || !description.trim()) {
      throw new TypeError(`${where}: give it a description: agents choose tools by it`);
    }
    const schema = input === undefined ? { type: 'object', properties: {}, additionalProperties: false } : input;
    const inputSchema = checkSchema(schema, `${where}: input`);
    let outputSchema;
    if (output !== undefined && output !== null) {
      if (!isPlainObject(output)) throw new TypeError(`${where}: output must be a JSON Schema object, not ${describe(output)}`);
      outputSchema = JSON.stringify(output);
    }
    registry.set(name, {
      name,
      description: description.trim(),
      inputSchema,
      outputSchema,
      schema: JSON.parse(inputSchema),
      fn,
    });
    return fn;
  }

  /** The registered tools, in registration order: [{name, description, inputSchema, outputSchema}]. */
  function tools() {
    return [...registry.values()].map(({ name, description, inputSchema, outputSchema }) => ({
      name,
      description,
      inputSchema,
      outputSchema,
    }));
  }

  function argumentsOf(t, inputText) {
    let data;
    try {
      data = JSON.parse(inputText);
    } catch (e) {
      if (!(e instanceof SyntaxError)) throw e; // e.g. out of memory
      throw ToolError.invalidInput(`the input is not JSON: ${e.message}`);
    }
    if (!isPlainObject(data)) throw ToolError.invalidInput(`the input must be a JSON object, not ${describe(data)}`);
    const props = isPlainObject(t.schema.properties) ? t.schema.properties : {};
    for (const [key, prop] of Object.entries(props)) {
      if (!(key in data) && isPlainObject(prop) && 'default' in prop) data[key] = structuredCloneJson(prop.default);
    }
    const missing = (Array.isArray(t.schema.required) ? t.schema.required : []).filter((k) => !(k in data));
    if (missing.length) {
      throw ToolError.invalidInput(`missing required parameter${missing.length > 1 ? 's' : ''} ${missing.map((k) => `\`${k}\``).join(', ')}`);
    }
    return data;
  }

  function toWitError(error) {
    if (error instanceof ComponentError) return error;
    if (isOutOfMemory(error)) {
      // Trap: an Error without `payload` is rethrown by the bindings.
      return new Error('out of memory');
    }
    if (error instanceof ToolError) return new ComponentError({ tag: error.kind, val: error.message });
    return new ComponentError({ tag: 'failed', val: describeFailure(error) });
  }

  /**
   * Run a tool: the `call` function of the `toolkit` export. Returns the list
   * of content items (or a promise of it, for an async tool); throws a
   * ComponentError whose `payload` is the `tool-error` variant.
   */
  function call(name, inputText) {
    let result;
    try {
      const t = registry.get(name);
      if (!t) throw ToolError.invalidInput(`this plugin has no tool named \`${name}\``);
      result = t.fn(argumentsOf(t, inputText));
      if (result && typeof result.then === 'function') {
        return Promise.resolve(result).then(contents).catch((e) => {
          throw toWitError(e);
        });
      }
      return contents(result);
    } catch (e) {
      throw toWitError(e);
    }
  }

  /** The `toolkit` export of the WIT world `plugin`. */
  const toolkit = Object.freeze({
    listTools: tools,
    call,
  });

  function level(l) {
    const name = String(l).toLowerCase();
    if (name === 'warning') return 'warn';
    if (!LEVELS.includes(name)) throw new TypeError(`unknown log level ${JSON.stringify(l)} (one of: ${LEVELS.join(', ')})`);
    return name;
  }

  /** What the host offers: logging, progress reports, configuration. */
  const host = Object.freeze({
    /** A record in the host's log, tagged with plugin, tool and session. */
    log(lvl, message) {
      hostImports.log(level(lvl), String(message));
    },
    trace: (m) => hostImports.log('trace', String(m)),
    debug: (m) => hostImports.log('debug', String(m)),
    info: (m) => hostImports.log('info', String(m)),
    warn: (m) => hostImports.log('warn', String(m)),
    error: (m) => hostImports.log('error', String(m)),
    /** Progress of the current call; streaming clients see it as it happens. */
    progress(message, done, total) {
      const num = (v) => (v === undefined || v === null ? undefined : Number(v));
      hostImports.reportProgress({ message: String(message), done: num(done), total: num(total) });
    },
    /** A string from the manifest's `[config]`, or `fallback` (default undefined). */
    config(key, fallback) {
      const v = hostImports.config(String(key));
      return v === undefined || v === null ? fallback : v;
    },
  });

  return { tool, tools, toolkit, call, host, ToolError, ComponentError, Content, json, text, binary, contents };
}

function structuredCloneJson(value) {
  return value === undefined ? undefined : JSON.parse(JSON.stringify(value));
}
