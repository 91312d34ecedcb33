import { z } from 'zod';
import { methods } from './methods.js';
import { paramSchemas, type MethodName } from './schemas.js';
import { ERROR_CODES } from './errors.js';

/**
 * The OpenRPC document of the API, generated from the same schemas that validate params, so
 * the document cannot drift from what the daemon accepts.
 */
export function buildOpenRpc(version: string): Record<string, unknown> {
  const names = Object.keys(paramSchemas) as MethodName[];
  return {
    openrpc: '1.3.2',
    info: { title: 'yello', version, description: 'Durable, signed two-party chats for agents (protocol yello.chat.v1).' },
    methods: names.map((name) => {
      const schema = z.toJSONSchema(paramSchemas[name], { io: 'input', unrepresentable: 'any' }) as {
        properties?: Record<string, unknown>;
        required?: string[];
      };
      const required = new Set(schema.required ?? []);
      return {
        name,
        summary: methods[name].summary,
        description: `Access: ${methods[name].access}.`,
        paramStructure: 'by-name',
        params: Object.entries(schema.properties ?? {}).map(([param, s]) => ({ name: param, required: required.has(param), schema: s })),
        result: { name: 'result', schema: { description: methods[name].result } },
      };
    }),
    components: {
      errors: Object.fromEntries(Object.entries(ERROR_CODES).map(([type, code]) => [type, { code, message: type, data: { type } }])),
    },
  };
}
