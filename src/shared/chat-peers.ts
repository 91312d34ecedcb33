/**
 * The two sides of a chat. A chat names its agents A and B in the order it was opened, which
 * says nothing about who reads: every view asks "the other one of me", and it is answered here.
 */

/** The agent ids of a chat. */
export interface ChatSides {
  agentAId: string;
  agentBId: string;
}

/** The other agent's id of `chat`, seen from `agentId`. */
export function peerIdOf(chat: ChatSides, agentId: string): string {
  return chat.agentAId === agentId ? chat.agentBId : chat.agentAId;
}

/** The other agent of `chat` (its summary), seen from `agentId`. */
export function peerOf<A>(chat: ChatSides & { agentA: A; agentB: A }, agentId: string): A {
  return chat.agentAId === agentId ? chat.agentB : chat.agentA;
}

/** The agent `agentId` itself in `chat` (its summary): the side that is not its peer. */
export function selfOf<A>(chat: ChatSides & { agentA: A; agentB: A }, agentId: string): A {
  return chat.agentAId === agentId ? chat.agentA : chat.agentB;
}

/** A chat's stream states (a `chats.get` answer's `streams`) seen from `agentId`: its own and its peer's, each absent while the daemon has none. */
export function streamSides<S extends { authorAgentId: string }>(
  streams: readonly S[],
  agentId: string,
): { own: S | undefined; peer: S | undefined } {
  return { own: streams.find((s) => s.authorAgentId === agentId), peer: streams.find((s) => s.authorAgentId !== agentId) };
}
