/**
 * Subscriptions (`chats.follow` and `chats.watch` together) one connection may hold at once
 * (docs/protocol.md §3.2). Not an option: the daemon enforces it and the client library's
 * inbox spreads its chats over connections by it.
 */
export const MAX_SUBSCRIPTIONS_PER_CONNECTION = 64;
