// The console's pages, rendered on the server from plain values; the client script adds the live
// transcript and the signature checks.

import type { Chat, StreamState } from '../client/index.js';
import { html, page, type Html, type PageBase } from './html.js';
import type { Overview } from './overview.js';
import type { Session } from './guard.js';

const time = (t: string | null): Html => (t ? html`<time datetime="${t}">${t.replace('T', ' ').replace(/\.\d+Z$/, 'Z')}</time>` : html`—`);

function uptime(ms: number): string {
  const s = Math.floor(ms / 1000);
  const d = Math.floor(s / 86400);
  const h = Math.floor((s % 86400) / 3600);
  const m = Math.floor((s % 3600) / 60);
  return d > 0 ? `${d}d ${h}h ${m}m` : h > 0 ? `${h}h ${m}m` : `${m}m ${s % 60}s`;
}

/** A form that posts one intervention, with the CLI command that does the same beside it. */
export function actionForm(
  session: Session,
  action: string,
  fields: Record<string, string>,
  label: string,
  cli: string,
  extra: Html = html``,
): Html {
  return html`<form class="action" method="post" action="actions/${action}">
    <input type="hidden" name="csrf" value="${session.csrf}" />
    ${Object.entries(fields).map(([k, v]) => html`<input type="hidden" name="${k}" value="${v}" />`)} ${extra}<button type="submit">
      ${label}
    </button>
    <span class="cli">CLI: <code>${cli}</code></span>
  </form>`;
}

export function overviewPage(o: Overview, session: Session, prefix: string): string {
  const s = o.status;
  const names = new Map(o.agents.map((a) => [a.agent.id, a.agent.username]));
  const body = html`<h1>yello console</h1>
    <section aria-labelledby="attention-h" class="attention">
      <h2 id="attention-h">Needs a person</h2>
      ${
        o.attention.length === 0
          ? html`<p class="ok">Nothing needs you: no breaks, no damage, no quota refusals lately, storage writable.</p>`
          : html`<ul>
              ${o.attention.map(
                (a) =>
                  html`<li class="att att-${a.kind}">
                    <strong>${a.kind}</strong>: ${a.what}. <span class="todo">What to do: ${a.todo}</span>${
                      a.chatId ? html` <a href="chats/${a.chatId}">open the chat</a>` : ''
                    }
                  </li>`,
              )}
            </ul>`
      }
      <p class="note">
        Appends paused on an unknown outcome are known only to the agent's own tools (its MCP server's operation_status or the Coordinator's
        events); the daemon does not record them. Quota refusals come from the daemon's counters.
      </p>
    </section>
    <section aria-labelledby="health-h">
      <h2 id="health-h">Daemon</h2>
      <dl class="kv">
        <dt>Version</dt>
        <dd>${s.version}</dd>
        <dt>Uptime</dt>
        <dd>${uptime(s.uptimeMs)}</dd>
        <dt>Storage</dt>
        <dd class="${s.storage === 'ok' ? 'ok' : 'bad'}">${s.storage === 'ok' ? 'writable' : 'READ-ONLY'}</dd>
        <dt>Policy</dt>
        <dd>${s.policy}</dd>
        <dt>Counts</dt>
        <dd>${s.counts.agents} agents, ${s.counts.chats} chats, ${s.counts.streams} streams, ${s.counts.records} records</dd>
        <dt>Corruption marks</dt>
        <dd class="${s.integrity.corruptStreams.length ? 'bad' : 'ok'}">${s.integrity.corruptStreams.length}</dd>
        <dt>Log losses</dt>
        <dd>${s.integrity.walIncidents.length}</dd>
        <dt>Signing keys</dt>
        <dd>
          <ul class="plain">
            ${o.keys.keys.map((k) => html`<li><code>${k.kid}</code> ${k.status} since ${time(k.createdAt)}</li>`)}
          </ul>
        </dd>
      </dl>
    </section>
    <section aria-labelledby="chats-h">
      <h2 id="chats-h">Chats</h2>
      ${
        o.chats.length === 0
          ? html`<p>No chats yet.</p>`
          : html`<table class="chats">
                <caption class="sr">
                  Chats, most recently active first
                </caption>
                <thead>
                  <tr>
                    <th scope="col">Chat</th>
                    <th scope="col">Between</th>
                    <th scope="col">Last activity</th>
                    <th scope="col">Unread messages</th>
                    <th scope="col">Writers</th>
                  </tr>
                </thead>
                <tbody>
                  ${o.chats.map(
                    (c) =>
                      html`<tr>
                        <td><a href="chats/${c.chat.id}">${c.chat.id}</a></td>
                        <td>${c.chat.agentA.username} ↔ ${c.chat.agentB.username}</td>
                        <td>${time(c.lastActivityAt)}</td>
                        <td>
                          ${c.chat.agentB.username}: ${c.streams[0].unread}${c.streams[0].unreadAtLeast ? '+' : ''} ·
                          ${c.chat.agentA.username}: ${c.streams[1].unread}${c.streams[1].unreadAtLeast ? '+' : ''}
                        </td>
                        <td>
                          ${c.streams.map((x) => html`<span class="writer">${names.get(x.state.authorAgentId) ?? x.state.authorAgentId}: ${writerText(x.state)}</span> `)}
                        </td>
                      </tr>`,
                  )}
                </tbody>
              </table>
              ${o.moreChats ? html`<p>Only the first chats are shown.</p>` : ''}`
      }
    </section>
    <section aria-labelledby="agents-h">
      <h2 id="agents-h">Agents</h2>
      <table class="agents">
        <caption class="sr">
          Agents
        </caption>
        <thead>
          <tr>
            <th scope="col">Username</th>
            <th scope="col">Name</th>
            <th scope="col">Id</th>
            <th scope="col">State</th>
            <th scope="col">Writers held</th>
            <th scope="col">Last activity</th>
            <th scope="col">Actions</th>
          </tr>
        </thead>
        <tbody>
          ${o.agents.map(
            (a) =>
              html`<tr>
                <td>${a.agent.username}</td>
                <td>${a.agent.name}</td>
                <td><code>${a.agent.id}</code></td>
                <td>${a.agent.disabled ? 'disabled' : a.connected ? 'connected' : 'not connected'}</td>
                <td>${a.writers}</td>
                <td>${time(a.lastActivityAt)}</td>
                <td>
                  ${
                    a.agent.disabled
                      ? ''
                      : html`${actionForm(session, 'rotate-token', { agentId: a.agent.id }, 'Rotate token', `yello agents rotate-token ${a.agent.username}`)}
                        ${actionForm(session, 'disable', { agentId: a.agent.id }, 'Disable', `yello agents disable ${a.agent.username}`, html`<label>Type the username to confirm <input name="confirm" autocomplete="off" required /></label> `)}`
                  }
                </td>
              </tr>`,
          )}
        </tbody>
      </table>
    </section>
    <section aria-labelledby="grants-h">
      <h2 id="grants-h">Grants</h2>
      ${
        o.grants.length === 0
          ? html`<p>No grants yet: no agent may open a chat.</p>`
          : html`<table class="grants">
                <caption class="sr">
                  Grants: the agent may open a chat with, and send to, the peer
                </caption>
                <thead>
                  <tr>
                    <th scope="col">Agent</th>
                    <th scope="col">may send to</th>
                    <th scope="col">Since</th>
                  </tr>
                </thead>
                <tbody>
                  ${o.grants.map(
                    (g) =>
                      html`<tr>
                        <td>${names.get(g.agentId) ?? g.agentId}</td>
                        <td>${names.get(g.peerAgentId) ?? g.peerAgentId}</td>
                        <td>${time(g.grantedAt)}</td>
                      </tr>`,
                  )}
                </tbody>
              </table>
              ${o.moreGrants ? html`<p>Only the first grants are shown: <code>yello grants list</code> lists them all.</p>` : ''}`
      }
      <form class="action" method="post" action="actions/grant-add">
        <input type="hidden" name="csrf" value="${session.csrf}" />
        <label>Agent <input name="agent" required autocomplete="off" /></label>
        <label>may send to <input name="peer" required autocomplete="off" /></label>
        <button type="submit" name="op" value="add">Add grant</button>
        <button type="submit" name="op" value="remove">Remove grant</button>
        <span class="cli">CLI: <code>yello grants add AGENT PEER</code>, <code>yello grants rm AGENT PEER</code></span>
      </form>
    </section>`;
  return page('Overview', body, { base: { prefix, csrf: session.csrf } });
}

function writerText(s: StreamState): string {
  if (!s.writer.active) return 'none';
  // No connection: the CLI's kept claim between commands, or a holder that is gone; the agent's tools take it over by themselves.
  return s.writer.connected ? 'connected' : 'kept, no connection';
}

/** The chat page: stream states and interventions from the server, the transcript from the client script. */
export function chatPage(chat: Chat, streams: [StreamState, StreamState], session: Session, prefix: string): string {
  const who = (s: StreamState): string => (s.authorAgentId === chat.agentAId ? chat.agentA.username : chat.agentB.username);
  const body = html`<h1>Chat ${chat.agentA.username} ↔ ${chat.agentB.username}</h1>
    <p>
      <code>${chat.id}</code> · <a href="chats/${chat.id}/export.jsonl" download="${chat.id}.jsonl">Export (JSONL, verifiable)</a>
      <span class="cli">CLI: <code>yello chats export ${chat.id} --out ${chat.id}.jsonl</code></span>
    </p>
    <div id="banners" aria-live="polite"></div>
    <section aria-labelledby="streams-h">
      <h2 id="streams-h">Streams</h2>
      ${streams.map(
        (s) =>
          html`<div class="stream" data-stream="${s.streamId}">
            <h3>${who(s)} → ${s.authorAgentId === chat.agentAId ? chat.agentB.username : chat.agentA.username}</h3>
            <p>
              generation ${s.generation}, positions ${s.firstPosition}–${s.nextPosition},
              ${s.acknowledged ? `acknowledged up to ${s.acknowledged.nextPosition} of generation ${s.acknowledged.generation}` : 'nothing acknowledged'},
              writer ${writerText(s)}${s.corruptFrom !== undefined ? `, DAMAGED from ${s.corruptFrom}` : ''}
            </p>
            <details>
              <summary>Interventions on this stream</summary>
              ${s.writer.active ? actionForm(session, 'release', { streamId: s.streamId, chatId: chat.id }, 'Release the claim', `yello streams release ${s.streamId}`) : ''}
              ${actionForm(
                session,
                'trim',
                { streamId: s.streamId, chatId: chat.id },
                'Trim',
                `yello streams trim ${s.streamId} POSITION`,
                html`<label
                    >Drop records below position <input name="beforePosition" inputmode="numeric" pattern="[0-9]+" required
                  /></label>
                  <label><input type="checkbox" name="force" value="true" /> also past what the reader acknowledged</label> `,
              )}
              ${actionForm(
                session,
                'reset',
                { streamId: s.streamId, chatId: chat.id },
                'Reset the stream',
                `yello streams reset ${s.streamId} --reason "…"`,
                html`<label>Reason <input name="reason" required autocomplete="off" /></label>
                  <label>Type <kbd>reset</kbd> to confirm <input name="confirm" autocomplete="off" required /></label> `,
              )}
            </details>
          </div>`,
      )}
    </section>
    <section aria-labelledby="transcript-h">
      <h2 id="transcript-h">Conversation</h2>
      <form id="search" role="search" class="search">
        <label>Search this chat <input type="search" id="q" autocomplete="off" /></label>
      </form>
      <p id="status" role="status">Loading the conversation…</p>
      <button type="button" id="older" hidden>Show earlier records</button>
      <ol id="transcript" class="transcript" aria-label="Conversation"></ol>
    </section>`;
  return page(`Chat ${chat.id}`, body, {
    base: { prefix, csrf: session.csrf },
    bodyData: { view: 'chat', chat: chat.id, a: chat.agentAId, b: chat.agentBId, an: chat.agentA.username, bn: chat.agentB.username },
  });
}

/** Verify an export file in the browser, against the daemon's JWKS; the file never leaves the browser. */
export function verifyPage(session: Session, prefix: string): string {
  const body = html`<h1>Verify an export</h1>
    <p>
      Choose a file written by <code>yello chats export</code> or the console's export. Every message's signature is checked here, in the
      browser, against the daemon's keys; the file is not uploaded.
    </p>
    <form class="search">
      <label>Export file <input type="file" id="exportfile" accept=".jsonl,application/jsonl,text/plain" /></label>
    </form>
    <p id="status" role="status"></p>
    <ol id="transcript" class="transcript" aria-label="Exported records"></ol>`;
  return page('Verify an export', body, { base: { prefix, csrf: session.csrf }, bodyData: { view: 'verify' } });
}

/** The answer to a state change: what happened, and the way back. */
export function resultPage(title: string, message: Html, back: string, ok: boolean, base: PageBase): string {
  return page(
    title,
    html`<h1>${title}</h1>
      <div class="${ok ? 'result ok' : 'result bad'}" role="${ok ? 'status' : 'alert'}">${message}</div>
      <p><a href="${back}">Back</a></p>`,
    { base },
  );
}

/** A plain refusal (no session, wrong Host, …) with what to do. */
export function refusalPage(title: string, what: string, base?: PageBase): string {
  return page(
    title,
    html`<h1>${title}</h1>
      <p role="alert">${what}</p>`,
    base ? { base } : {},
  );
}
