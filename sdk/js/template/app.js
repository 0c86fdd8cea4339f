// my-plugin: a toolhost plugin template in JavaScript (see README.md).
//
// Each `tool({...}, fn)` call at the top level registers a tool: its name, the
// description agents read, and the JSON Schema of its input. `fn` gets the
// parsed input (defaults filled in) and returns a string (text), `json(value)`,
// `binary(mediaType, bytes, name?)` or an array of those.
//
// This module runs once, at build time (componentize-js snapshots the engine
// after it); every call then runs in a fresh copy of that snapshot.
import { tool, ToolError, host } from 'toolhost-sdk';

tool(
  {
    name: 'greet',
    description: 'Greet someone by name.',
    input: {
      type: 'object',
      properties: {
        name: { type: 'string', description: 'Who to greet.' },
        excited: {
          type: 'boolean',
          default: false,
          description: 'End with an exclamation mark instead of a full stop.',
        },
      },
      required: ['name'],
      additionalProperties: false,
    },
  },
  ({ name, excited }) => {
    name = name.trim();
    if (!name) throw ToolError.invalidInput('`name` is empty');
    const greeting = host.config('greeting', 'Hello');
    host.log('debug', `greeting ${JSON.stringify(name)}`);
    return `${greeting}, ${name}${excited ? '!' : '.'}`;
  },
);
