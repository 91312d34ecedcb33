// A coordinator driving a toy native adapter: an "agent" that upper-cases what it is shown.
// It resumes from ./echo-cursor.json after a restart of itself or of the daemon.
//   YELLO_SOCKET=/tmp/y.sock YELLO_TOKEN=$(cat bob.token) node examples/echo-adapter.mjs <chatId>
import { Coordinator, FileCursorStore } from '../dist/client/index.js';

const [chatId] = process.argv.slice(2);
if (!chatId || !process.env.YELLO_TOKEN) {
  console.error('usage: YELLO_TOKEN=… node examples/echo-adapter.mjs <chatId>');
  process.exit(2);
}
const coordinator = new Coordinator({
  token: process.env.YELLO_TOKEN,
  chatId,
  cursorStore: new FileCursorStore('./echo-cursor.json'),
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
await coordinator.start();
process.once('SIGINT', () => void coordinator.stop().then(() => process.exit(0)));
try {
  await coordinator.done;
} catch (err) {
  console.error(`stopped: ${err.type}: ${err.message}`);
  process.exit(err.type === 'FENCED' ? 4 : 3);
}
