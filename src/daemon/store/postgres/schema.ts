// The PostgreSQL schema of the store, as an ordered list of migrations (issue 24). A migration
// is never edited once released: a change is a new migration at the end. `migrate.ts` applies
// the ones a database lacks and refuses a database that has one this code does not know.
//
// Values keep yello's own checksums: every `body` is `row-codec.ts`'s encoding (the LevelDB
// value encoding, crc32(key + "\n" + json) + json) bound to a key naming the row, so a body read
// back is checked as a LevelDB value is, and a body copied onto another row fails its check. The
// columns beside a body are the ones that constraints, preconditions and range reads need; the
// body is the truth.

/** One schema step. `version` counts from 1 without gaps. */
export interface Migration {
  version: number;
  name: string;
  sql: string;
}

export const MIGRATIONS: readonly Migration[] = [
  {
    version: 1,
    name: 'streams, directory, keys and integrity tables',
    sql: `
-- One row per stream: the head every change is decided against. The columns of the
-- precondition (generation, next_position, writer_epoch) are what a commit's conditional
-- UPDATE compares; meta is the whole StreamMeta, checksummed.
create table heads (
  stream_id       text primary key,
  chat_id         text not null,
  author          text not null,
  peer            text not null,
  generation      bigint not null check (generation >= 1),
  first_position  bigint not null check (first_position >= 0),
  next_position   bigint not null check (next_position >= first_position),
  writer_epoch    bigint not null check (writer_epoch >= 0),
  meta            text not null
);
create index heads_chat on heads (chat_id);

-- Records by exact position: the primary key is what makes two appends at one position
-- impossible even if a precondition were wrong.
create table records (
  stream_id   text not null,
  generation  bigint not null,
  position    bigint not null,
  body        text not null,
  primary key (stream_id, generation, position)
);

-- Operations are kept forever while their stream exists: (stream_id, operation_id) is the
-- permanent idempotency key.
create table operations (
  stream_id     text not null,
  operation_id  text not null,
  generation    bigint not null,
  first_position bigint not null,
  next_position bigint not null,
  body          text not null,
  primary key (stream_id, operation_id)
);

-- The operation log: which operation wrote each position range, in order (operations.list).
create table op_log (
  stream_id     text not null,
  generation    bigint not null,
  position      bigint not null,
  operation_id  text not null,
  body          text not null,
  primary key (stream_id, generation, position)
);

-- Client message ids, unique within a stream generation.
create table message_ids (
  stream_id          text not null,
  generation         bigint not null,
  client_message_id  text not null,
  position           bigint not null,
  body               text not null,
  primary key (stream_id, generation, client_message_id)
);

create table agents (
  agent_id  text primary key,
  body      text not null
);

-- A username names one agent, deployment-wide.
create table usernames (
  username  text primary key,
  agent_id  text not null unique,
  body      text not null
);

create table tokens (
  token_hash  text primary key,
  agent_id    text not null,
  body        text not null
);
create index tokens_agent on tokens (agent_id);

create table grants (
  agent_id       text not null,
  peer_agent_id  text not null,
  body           text not null,
  primary key (agent_id, peer_agent_id)
);

create table chats (
  chat_id  text primary key,
  body     text not null
);

-- One chat per pair of agents (a < b), by constraint: two daemons creating the same chat at
-- once find the one that won.
create table pairs (
  a        text not null,
  b        text not null,
  chat_id  text not null unique references chats (chat_id),
  body     text not null,
  primary key (a, b),
  check (a < b)
);

create table members (
  agent_id  text not null,
  chat_id   text not null references chats (chat_id),
  body      text not null,
  primary key (agent_id, chat_id)
);

-- Every daemon's public signing keys, retired ones included, so that a record verifies on
-- any daemon of the deployment.
create table keys (
  kid         text primary key,
  daemon      text not null,
  retired     boolean not null,
  body        text not null
);

-- Corruption marks of a stream generation (generation 0: the whole stream).
create table corruption_marks (
  stream_id   text not null,
  generation  bigint not null,
  body        text not null,
  primary key (stream_id, generation)
);

-- Named counters and settings of the deployment (meta/* in LevelDB).
create table meta (
  name  text primary key,
  body  text not null
);
`,
  },
  {
    version: 2,
    name: 'the operation log is an index of operations',
    sql: `
-- operations.list reads the operations of a stream in position order: an index over operations
-- serves it, so an append writes one row less (issue 24: op_log was a copy of three columns
-- of operations, written and swept with it). Unique, as op_log's primary key was: two
-- operations starting at one position of a generation are impossible. Daemons of schema 1 still
-- running fail their appends once op_log is gone (relation does not exist: nothing written);
-- stop them before the first daemon of schema 2 starts (docs/multi-host.md). No grant changes
-- (an index needs none; op_log's grants go with the table).
create unique index operations_log on operations (stream_id, generation, first_position);
drop table op_log;
`,
  },
  {
    version: 3,
    name: 'a disabled agent has no token row',
    sql: `
-- Every commit of an agent's change checks, in its transaction, that the session's token row
-- still names the agent (issue 52: a revocation through one daemon is in force on all of them
-- before it returns, not when their notices arrive). A rotation replaces the row; a disable now
-- deletes it, and so do the disabled agents of earlier schemas here. Bodies are JSON.stringify
-- output after an 8-digit checksum: "disabled":true cannot occur inside a string value there
-- (its quotes would be escaped). Daemons of schema 2 still running would keep a disabled
-- agent's token row on their next disable: stop them first (docs/multi-host.md).
delete from tokens t using agents a where t.agent_id = a.agent_id and a.body like '%"disabled":true%';
`,
  },
];

/** The newest schema version this code knows. */
export const SCHEMA_VERSION = MIGRATIONS.reduce((v, m) => Math.max(v, m.version), 0);
