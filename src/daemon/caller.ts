/** Who is calling: fixed by `session.hello` on the connection. */
export type Caller = { role: 'admin' } | { role: 'agent'; agentId: string; tokenHash: string };
