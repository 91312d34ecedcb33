import { errors } from '../../shared/errors.js';
import { formatDecimal } from '../../shared/ids.js';
import type { StoredRecord, StreamState } from '../../shared/types.js';
import type { Caller } from '../caller.js';
import { hashToken, newToken } from '../crypto/tokens.js';
import type { ClaimRequest, ReleaseRequest } from '../requests.js';
import type { StorePort } from '../store/port/store-port.js';
import { expectOf, type ChangeAdmission } from '../store/port/stream-port.js';
import { cloneMeta, type StreamMeta } from '../store/stream-meta.js';
import { assertAuthor } from './access.js';
import type { StreamContext } from './context.js';
import { decideAgain, refuseUnlessMoved, stale } from './decide-again.js';
import type { StreamHeads } from './heads.js';
import type { Holder, WriterPresence } from './writer-presence.js';

const COORDINATOR_TOKEN_PREFIX = 'yello_ct_';

/** What `streams.claim` answers: the writer's new epoch and the token its appends carry. */
export interface Claim {
  streamId: string;
  generation: string;
  epoch: string;
  coordinatorToken: string;
  nextPosition: string;
}

/**
 * Writer fencing: one coordinator writes a stream at a time. A claim moves the writer epoch on,
 * records a `chat.writer-fence` in the stream and issues a new coordinator token; appends
 * carrying an older token are FENCED (`tokenCurrent`).
 */
export class Fencing {
  readonly #store: StorePort;
  readonly #heads: StreamHeads;
  readonly #presence: WriterPresence;

  constructor({ store, heads, presence }: StreamContext) {
    this.#store = store;
    this.#heads = heads;
    this.#presence = presence;
  }

  /**
   * `streams.claim`. A holder blocks the claim unless `replace` is true, or it is
   * `"if-abandoned"` and no connection attached to the holder's claim is open. The claim is
   * attached to `holder`.
   */
  async claim(caller: Caller, p: ClaimRequest, holder?: Holder): Promise<Claim> {
    return decideAgain((last) => this.#claim(caller, p, holder, last));
  }

  async #claim(caller: Caller, p: ClaimRequest, holder: Holder | undefined, last: boolean): Promise<Claim | 'stale'> {
    this.#store.assertWritable();
    assertAuthor(caller, p.streamId);
    const meta = this.#heads.writable(p.streamId);
    const connected = this.#presence.connected(meta);
    if (meta.writer.active && (p.replace === false || (p.replace === 'if-abandoned' && connected))) {
      // The holder may have released (or been reset) through another daemon, unheard here yet.
      const active = errors.writerActive(p.streamId, formatDecimal(meta.writer.epoch), meta.writer.claimedAt ?? '', connected);
      return refuseUnlessMoved(this.#heads, p.streamId, meta, last, active);
    }
    // The fence says whether an active coordinator was displaced, whatever replace asked.
    const reason = p.reason ?? (p.replace === 'if-abandoned' && meta.writer.active ? 'abandoned' : undefined);
    const next = cloneMeta(meta);
    const epoch = meta.writer.epoch + 1;
    const claimedAt = nextTimestamp(next);
    const token = `${COORDINATOR_TOKEN_PREFIX}${newToken('')}`;
    const position = next.nextPosition;
    const fence = {
      epoch: formatDecimal(epoch),
      claimedAt,
      replaced: meta.writer.active,
      ...(reason !== undefined ? { reason } : {}),
    };
    const record: StoredRecord = {
      streamId: p.streamId,
      generation: formatDecimal(next.generation),
      position: formatDecimal(position),
      wrapper: {
        version: 2,
        chatId: meta.chatId,
        authorAgentId: meta.authorAgentId,
        operationId: `fence.${epoch}`,
        recordIndex: 0,
        type: 'chat.writer-fence',
        fence,
      },
    };
    const tokenHash = hashToken(token);
    next.writer = { epoch, claimedAt, active: true, tokenHash };
    next.nextPosition = position + 1;
    // Attached before the commit: the claim is admitted now, and its holder is this connection.
    if (holder) this.#presence.attach(p.streamId, tokenHash, holder);
    const change = { kind: 'claim', expect: expectOf(meta), next, fence: record, ...admissionOf(caller, false) } as const;
    if (stale(await this.#heads.commit(change), last)) return 'stale';
    return {
      streamId: p.streamId,
      generation: formatDecimal(next.generation),
      epoch: formatDecimal(epoch),
      coordinatorToken: token,
      nextPosition: formatDecimal(next.nextPosition),
    };
  }

  /** `streams.release`: the author with its current token, or the admin. */
  async release(caller: Caller, p: ReleaseRequest): Promise<StreamState> {
    return decideAgain((last) => this.#release(caller, p, last));
  }

  async #release(caller: Caller, p: ReleaseRequest, last: boolean): Promise<StreamState | 'stale'> {
    this.#store.assertWritable();
    // The author must prove it holds the writer lease; the admin may release without a token.
    let authorToken: string | null = null;
    if (caller.role === 'agent') {
      assertAuthor(caller, p.streamId);
      if (p.coordinatorToken === undefined)
        throw errors.invalidParams('coordinatorToken', 'the author releases with its coordinator token');
      authorToken = p.coordinatorToken;
    }
    const meta = this.#heads.writable(p.streamId);
    if (authorToken !== null && !tokenCurrent(meta, authorToken)) {
      // The token may be one claimed through another daemon, unheard here yet.
      return refuseUnlessMoved(this.#heads, p.streamId, meta, last, errors.fenced(p.streamId, formatDecimal(meta.writer.epoch)));
    }
    if (meta.writer.active) {
      const next = cloneMeta(meta);
      next.writer = { ...next.writer, active: false, tokenHash: null };
      const outcome = await this.#heads.commit({ kind: 'release', expect: expectOf(meta), next, ...admissionOf(caller, false) });
      // Out of attempts with a token the store's head no longer holds: FENCED, as on the first check.
      if (last && outcome.status === 'stale' && outcome.head && authorToken !== null && !tokenCurrent(outcome.head, authorToken))
        throw errors.fenced(p.streamId, formatDecimal(outcome.head.writer.epoch));
      if (stale(outcome, last)) return 'stale';
      return this.#heads.state(next);
    }
    await this.#store.streams.headDurable(p.streamId);
    return this.#heads.state(meta);
  }
}

/** Whether `token` is the coordinator token of the stream's active writer. */
export function tokenCurrent(meta: StreamMeta, token: string): boolean {
  return meta.writer.active && meta.writer.tokenHash !== null && meta.writer.tokenHash === hashToken(token);
}

/** Non-decreasing RFC 3339 timestamp for the next record of `meta` (mutates lastCreatedAt). */
export function nextTimestamp(meta: StreamMeta): string {
  const now = new Date().toISOString();
  const ts = meta.lastCreatedAt !== null && meta.lastCreatedAt > now ? meta.lastCreatedAt : now;
  meta.lastCreatedAt = ts;
  return ts;
}

/**
 * What an agent's change relies on besides the head, for the store to check in the commit
 * (`ChangeAdmission`): its session, and the grant when `grant` (an append under policy
 * `grants`). Nothing for the admin, whose token is not in the store.
 */
export function admissionOf(caller: Caller, grant: boolean): { admission?: ChangeAdmission } {
  return caller.role === 'agent' ? { admission: { agentId: caller.agentId, tokenHash: caller.tokenHash, grant } } : {};
}
