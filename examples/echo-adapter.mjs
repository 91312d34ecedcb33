// A coordinator driving a toy native adapter: an "agent" that upper-cases what it is shown.
// It resumes from its cursor file after a restart of itself or of the daemon; the file lives
// in the state dir ($XDG_STATE_HOME/yello-examples/echo-<chatId>.json, else under
// ~/.local/state), or where the second argument says. With the daemon of `npm start`:
//   node examples/echo-adapter.mjs <chatId> [cursor-file]      # $YELLO_TOKEN: the agent's token
// e.g. YELLO_TOKEN=$(cat "$Q/bob.token") node examples/echo-adapter.mjs "$CHAT" in the README
// quickstart's shell (which also sets YELLO_SOCKET). Ctrl-C stops it.
import { homedir } from 'node:os';
import { join } from 'node:path';

function fail(message, code = 1) {
  console.error(`echo-adapter: ${message}`);
  process.exit(code);
}
const { Coordinator, FileCursorStore } = await import('yello').catch(() =>
  fail('the client library is not built: run npm run build (npm start builds it too)', 2),
);

const [chatId, cursorFile] = process.argv.slice(2);
if (!chatId || !process.env.YELLO_TOKEN) fail('usage: YELLO_TOKEN=… node examples/echo-adapter.mjs <chatId> [cursor-file]', 2);
const stateHome = process.env.XDG_STATE_HOME || join(homedir(), '.local/state');
const cursorPath = cursorFile ?? join(stateHome, 'yello-examples', `echo-${chatId}.json`);

const coordinator = new Coordinator({
  ...(process.env.YELLO_SOCKET ? { socketPath: process.env.YELLO_SOCKET } : {}),
  token: process.env.YELLO_TOKEN,
  chatId,
  cursorStore: new FileCursorStore(cursorPath),
  adapter: {
    // The native side: here a function; in real use, the agent runtime's inbox.
    async present(batch) {
      const texts = batch.records.filter((r) => r.wrapper.type === 'chat.message').map((r) => r.wrapper.message.content);
      if (texts.length === 0) return;
      console.log(`presented ${batch.streamId} ${batch.fromPosition}..${batch.nextPosition}: ${texts.join(' | ')}`);
      await coordinator.reply(texts.join(' ').toUpperCase(), { ack: batch });
    },
    resolved(outcome) {
      console.log(`append ${outcome.operationId} ${outcome.committed ? 'did' : 'did not'} commit`);
    },
  },
});
coordinator.on('state', ({ state, previous, error }) => console.log(`state ${previous} → ${state}${error ? ` (${error.message})` : ''}`));
coordinator.on('error', () => {});
try {
  await coordinator.start();
} catch (err) {
  const hint = err.type === 'CONNECTION_LOST' ? ' (start the daemon first: npm start, or set YELLO_SOCKET to its socket)' : '';
  fail(`${err.type ? `${err.type}: ` : ''}${err.message}${hint}`);
}
console.log(`cursor file ${cursorPath}`);
process.once('SIGINT', () => void coordinator.stop().then(() => process.exit(0)));
process.once('SIGTERM', () => void coordinator.stop().then(() => process.exit(0)));
try {
  await coordinator.done;
} catch (err) {
  fail(`stopped: ${err.type}: ${err.message}`, err.type === 'FENCED' ? 4 : 3);
}
