/**
 * The canonical encodings of docs/protocol.md §5 that both the daemon (to sign) and every reader
 * (to verify) must compute byte for byte. Pure functions: no keys, no I/O, no crypto. The hashes
 * over these texts (`contentSha256` is the content's, `clientMessageId` that of
 * {@link clientMessageIdText}) are computed by the runtime: src/daemon/crypto/hashing.ts and
 * src/client/hashing.ts.
 */

/** Signed payload domain tag. */
export const MESSAGE_PAYLOAD_TAG = 'yello.chat.message.v1';
/** clientMessageId domain tag. */
export const CLIENT_MESSAGE_ID_TAG = 'yello.chat.client-message-id.v1';
/** The only signature algorithm. */
export const SIGNATURE_ALG = 'ES256';

/** The text whose SHA-256 (base64url, no padding) is the sender-scoped idempotency id of a message. */
export function clientMessageIdText(chatId: string, fromAgentId: string, messageId: string): string {
  return `${CLIENT_MESSAGE_ID_TAG}\n${chatId}\n${fromAgentId}\n${messageId}`;
}

/** Fields covered by a message signature. */
export interface SignedFields {
  chatId: string;
  fromAgentId: string;
  toAgentId: string;
  createdAt: string;
  contentSha256: string;
}

/**
 * The signed fields in payload order. The one definition of the payload's layout: the daemon
 * signs with it, the client library verifies with it, and the console's browser script is
 * served with it (src/console/assets/console-js.ts interpolates these constants).
 */
export const MESSAGE_PAYLOAD_FIELDS = [
  'chatId',
  'fromAgentId',
  'toAgentId',
  'createdAt',
  'contentSha256',
] as const satisfies readonly (keyof SignedFields)[];

/** The exact UTF-8 text that is signed: the tag, then the fields in payload order, joined with `\n`, no trailing newline. */
export function messagePayload(f: SignedFields): string {
  return [MESSAGE_PAYLOAD_TAG, ...MESSAGE_PAYLOAD_FIELDS.map((k) => f[k])].join('\n');
}
