// The console's export download: the whole file or a page saying what is missing, never half a file.

import type { YelloClient } from '../client/index.js';
import { exportChat } from '../client/chat-export.js';
import { html, type PageBase } from './html.js';
import { resultPage } from './pages.js';

/** The download (`body` under `name`), or the page to answer instead (`refusal`). */
export type ExportFile = { refusal: null; body: string; name: string } | { refusal: string };

/**
 * Build the export whole first, so a failure answers an error page; a damaged generation is
 * never downloaded silently: the person first reads what is missing, then may ask for `partial`.
 */
export async function exportFile(client: YelloClient, chatId: string, partial: boolean, base: PageBase): Promise<ExportFile> {
  const lines: string[] = [];
  const damage: string[] = [];
  for await (const item of exportChat(client, chatId)) {
    if ('record' in item) lines.push(JSON.stringify(item.record));
    else if ('checkpoint' in item) lines.push(JSON.stringify({ checkpoint: item.checkpoint }));
    else {
      const u = item.unexportable;
      damage.push(
        `${u.streamId} generation ${u.generation} ${u.fromPosition === null ? 'cannot be exported' : `is exported only below position ${u.fromPosition}`}: ${u.message}`,
      );
    }
  }
  if (damage.length > 0 && !partial)
    return {
      refusal: resultPage(
        'The export would be incomplete',
        html`<ul>
            ${damage.map((d) => html`<li>${d}</li>`)}
          </ul>
          <p>
            <a href="chats/${chatId}/export.jsonl?partial=1" download="${chatId}.partial.jsonl">Download what verifies below the damage</a>
            (CLI: <code>yello chats export ${chatId}</code>, which exits 1 for the same reason)
          </p>`,
        `chats/${chatId}`,
        false,
        base,
      ),
    };
  return { refusal: null, body: lines.map((l) => l + '\n').join(''), name: `${chatId}${damage.length > 0 ? '.partial' : ''}.jsonl` };
}
