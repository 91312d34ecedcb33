import {
  CallToolRequestSchema,
  InitializeRequestSchema,
  ListResourcesRequestSchema,
  ListResourceTemplatesRequestSchema,
  ListToolsRequestSchema,
  PingRequestSchema,
  ReadResourceRequestSchema,
  SetLevelRequestSchema,
  SubscribeRequestSchema,
  UnsubscribeRequestSchema,
  type JSONRPCMessage,
} from '@modelcontextprotocol/sdk/types.js';
import type { Transport } from '@modelcontextprotocol/sdk/shared/transport.js';

/** JSON-RPC 2.0 and MCP error codes the gate answers with. */
export const RPC_ERROR = {
  PARSE_ERROR: -32700,
  INVALID_REQUEST: -32600,
  INVALID_PARAMS: -32602,
  /** MCP (2025-06-18, resources, "Error Handling"): a resource that does not exist. */
  RESOURCE_NOT_FOUND: -32002,
} as const;

/** What the gate knows about the server behind it. */
export interface RequestGateOptions {
  /** The names `tools/call` accepts. */
  toolNames: () => Iterable<string>;
  /** Whether `resources/read` could find `uri` (its shape; whether the chat exists is the handler's). */
  isResourceUri: (uri: string) => boolean;
  /** How the server's resources are named, for the error's advice. */
  resourceTemplate: string;
}

type Id = string | number;
type Parsed = { success: true } | { success: false; error: { issues: Array<{ path: PropertyKey[]; message: string }> } };

// The requests this server handles whose params the SDK validates by throwing its schema
// error, which the SDK then answers as -32603 with the whole error dump: checked here first.
const PARAMS_SCHEMAS: Readonly<Record<string, { safeParse(v: unknown): Parsed }>> = {
  initialize: InitializeRequestSchema,
  ping: PingRequestSchema,
  'tools/list': ListToolsRequestSchema,
  'tools/call': CallToolRequestSchema,
  'resources/list': ListResourcesRequestSchema,
  'resources/templates/list': ListResourceTemplatesRequestSchema,
  'resources/read': ReadResourceRequestSchema,
  'resources/subscribe': SubscribeRequestSchema,
  'resources/unsubscribe': UnsubscribeRequestSchema,
  'logging/setLevel': SetLevelRequestSchema,
};

// Allowed before initialize (MCP lifecycle: "other than pings").
const BEFORE_INITIALIZE = new Set(['initialize', 'ping']);

const isId = (v: unknown): v is Id => typeof v === 'string' || (typeof v === 'number' && Number.isFinite(v));

/** zod issues as one short line: `params.level: Invalid option: …; …` (never the raw dump). */
function issuesLine(issues: Array<{ path: PropertyKey[]; message: string }>): string {
  return issues
    .slice(0, 5)
    .map((i) => `${i.path.length ? i.path.map(String).join('.') : 'message'}: ${i.message}`)
    .join('; ');
}

/** A JSON-RPC error response of the gate. */
export interface GateRefusal {
  jsonrpc: '2.0';
  id: Id | null;
  error: { code: number; message: string; data?: Record<string, unknown> };
}

function refusal(id: Id | null, code: number, message: string, data?: Record<string, unknown>): GateRefusal {
  return { jsonrpc: '2.0', id, error: { code, message, ...(data ? { data } : {}) } };
}

const errorLine = (id: Id | null, code: number, message: string): string => JSON.stringify(refusal(id, code, message)) + '\n';

/**
 * The framing checks of one stdin line, before the SDK's stdio transport parses it (which would
 * drop what it cannot read without an answer): not JSON → -32700 (id null); a JSON array (a
 * batch, which MCP 2025-06-18 removed) or anything that is not a JSON-RPC 2.0 message → -32600.
 * The error response (one JSON line) for `line`, or null to pass the line on. A message
 * object reaching a server through any other transport has the shape already.
 */
export function frameError(line: string): string | null {
  let message: unknown;
  try {
    message = JSON.parse(line);
  } catch (err) {
    return errorLine(
      null,
      RPC_ERROR.PARSE_ERROR,
      `Parse error: the line is not JSON (${(err as Error).message}); nothing was done. Send one JSON-RPC message per line.`,
    );
  }
  if (Array.isArray(message))
    return errorLine(
      null,
      RPC_ERROR.INVALID_REQUEST,
      'Invalid Request: JSON-RPC batches (arrays) are not part of MCP since 2025-06-18; nothing was done. Send one message per line.',
    );
  if (typeof message !== 'object' || message === null)
    return errorLine(null, RPC_ERROR.INVALID_REQUEST, 'Invalid Request: a JSON-RPC message is a JSON object; nothing was done.');
  const m = message as Record<string, unknown>;
  const id = isId(m.id) ? m.id : null;
  if (m.jsonrpc !== '2.0') return errorLine(id, RPC_ERROR.INVALID_REQUEST, 'Invalid Request: "jsonrpc" must be "2.0".');
  if (m.method === undefined) {
    // A response to a request of the server (the SDK matches it, or ignores a stray one).
    if (id !== null && ('result' in m || 'error' in m)) return null;
    return errorLine(
      id,
      RPC_ERROR.INVALID_REQUEST,
      'Invalid Request: a message needs a "method" (request, notification) or "result"/"error" (response).',
    );
  }
  if (typeof m.method !== 'string') return errorLine(id, RPC_ERROR.INVALID_REQUEST, 'Invalid Request: "method" must be a string.');
  if ('id' in m && id === null)
    return errorLine(null, RPC_ERROR.INVALID_REQUEST, 'Invalid Request: a request id is a string or a number (MCP: never null).');
  return null;
}

/**
 * The checks the SDK's server does not make, or makes with the wrong answer, applied to each
 * message a client sends before the SDK sees it (docs/mcp.md, "Protocol conformance"), on any
 * transport ({@link gatedTransport}). A request that fails is answered here and never reaches
 * the SDK:
 *
 * - a request other than `initialize` or `ping` before `initialize` → -32600;
 * - params that the method's schema refuses (a bad `logging/setLevel` level, a `tools/call`
 *   without a name) → -32602 with the failing fields, not the SDK's -32603 and zod dump;
 * - `tools/call` of a tool the server does not have → -32602 (the SDK answers a tool result);
 * - `resources/read` of a URI no resource of the server has → -32002.
 */
export class RequestGate {
  readonly #opts: RequestGateOptions;
  #initialized = false;

  constructor(options: RequestGateOptions) {
    this.#opts = options;
  }

  /** The error response for `message`, or null to pass it on (responses and notifications always pass). */
  check(message: object): GateRefusal | null {
    const m = message as Record<string, unknown>;
    if (typeof m.method !== 'string' || !isId(m.id)) return null;
    return this.#checkRequest(m.id, m.method, m);
  }

  #checkRequest(id: Id, method: string, m: Record<string, unknown>): GateRefusal | null {
    if (!this.#initialized && !BEFORE_INITIALIZE.has(method))
      return refusal(
        id,
        RPC_ERROR.INVALID_REQUEST,
        `Invalid Request: the session is not initialized; send "initialize" (then "notifications/initialized") before "${method}".`,
      );
    const schema = PARAMS_SCHEMAS[method];
    if (schema) {
      const parsed = schema.safeParse(m);
      if (!parsed.success) return refusal(id, RPC_ERROR.INVALID_PARAMS, `Invalid params for ${method}: ${issuesLine(parsed.error.issues)}`);
    }
    const params = (m.params ?? {}) as Record<string, unknown>;
    if (method === 'initialize') this.#initialized = true;
    if (method === 'tools/call') {
      const names = [...this.#opts.toolNames()];
      const name = params.name as string;
      if (!names.includes(name))
        return refusal(
          id,
          RPC_ERROR.INVALID_PARAMS,
          `Unknown tool: ${JSON.stringify(name)}. This server's tools are ${names.join(', ')} (tools/list).`,
          {
            name,
          },
        );
    }
    if (method === 'resources/read') {
      const uri = params.uri as string;
      if (!this.#opts.isResourceUri(uri))
        return refusal(
          id,
          RPC_ERROR.RESOURCE_NOT_FOUND,
          `Resource not found: ${uri}. This server's resources are ${this.#opts.resourceTemplate} (resources/list lists them).`,
          { uri },
        );
    }
    return null;
  }
}

/**
 * `transport` with `gate` in front of whoever connects to it (the SDK's server): a message the
 * gate refuses is answered on the transport and never delivered.
 */
export function gatedTransport(transport: Transport, gate: RequestGate): Transport {
  const gated: Transport = {
    async start() {
      transport.onmessage = (message, extra) => {
        const refused = gate.check(message);
        if (refused === null) gated.onmessage?.(message, extra);
        else void transport.send(refused as JSONRPCMessage).catch((err: unknown) => gated.onerror?.(err as Error));
      };
      transport.onclose = () => gated.onclose?.();
      transport.onerror = (err) => gated.onerror?.(err);
      await transport.start();
    },
    send: (message, options) => transport.send(message, options),
    close: () => transport.close(),
    get sessionId() {
      return transport.sessionId;
    },
  };
  if (transport.setProtocolVersion) gated.setProtocolVersion = (version) => transport.setProtocolVersion?.(version);
  return gated;
}
