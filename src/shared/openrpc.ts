import { z } from 'zod';
import { ERROR_CODES } from './errors.js';
import { methods } from './methods.js';

/**
 * The OpenRPC document of the API, generated from the method table whose schemas validate
 * params, so the document cannot drift from what the daemon accepts.
 */
export function buildOpenRpc(version: string): Record<string, unknown> {
  return {
    openrpc: '1.3.2',
    info: { title: 'yello', version, description: 'Durable, signed two-party chats for agents (protocol yello.chat.v1).' },
    methods: Object.values(methods).map((m) => {
      const schema = z.toJSONSchema(m.params, { io: 'input', unrepresentable: 'any' }) as {
        properties?: Record<string, unknown>;
        required?: string[];
      };
      const required = new Set(schema.required ?? []);
      return {
        name: m.name,
        summary: m.summary,
        description: `Access: ${m.access}.`,
        paramStructure: 'by-name',
        params: Object.entries(schema.properties ?? {}).map(([param, s]) => ({ name: param, required: required.has(param), schema: s })),
        result: { name: 'result', schema: { description: m.result } },
      };
    }),
    components: {
      errors: Object.fromEntries(Object.entries(ERROR_CODES).map(([type, code]) => [type, { code, message: type, data: { type } }])),
    },
  };
}
