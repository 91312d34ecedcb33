// A Unix-socket relay in front of a real daemon that can lose the answer to one append: armed
// with cutNextAppend(), it forwards the next `streams.append` request, waits for the daemon's
// answer (so the append really committed), drops it and closes that client's connection. The
// client saw its request written and no answer: an append of unknown outcome, exactly as a
// connection lost at that moment leaves it. Everything else passes through unchanged.

import fs from 'node:fs/promises';
import net from 'node:net';
import path from 'node:path';
import { makeTempDir } from './daemon-process.js';

export class AnswerCutter {
  readonly #server: net.Server;
  readonly #sockets = new Set<net.Socket>();
  #armed = false;
  /** The operationIds whose answers were dropped. */
  readonly cut: string[] = [];

  private constructor(
    readonly socketPath: string,
    readonly dir: string,
    target: string,
  ) {
    this.#server = net.createServer((client) => {
      const upstream = net.connect(target);
      this.#sockets.add(client).add(upstream);
      let cutId: unknown = undefined;
      let fromClient = '';
      let fromDaemon = '';
      const close = () => {
        client.destroy();
        upstream.destroy();
      };
      client.on('data', (chunk) => {
        fromClient += chunk.toString('utf8');
        let nl: number;
        while ((nl = fromClient.indexOf('\n')) >= 0) {
          const line = fromClient.slice(0, nl + 1);
          fromClient = fromClient.slice(nl + 1);
          if (this.#armed && line.includes('"streams.append"')) {
            this.#armed = false;
            const req = JSON.parse(line) as { id: unknown; params: { operationId: string } };
            cutId = req.id;
            this.cut.push(req.params.operationId);
          }
          upstream.write(line);
        }
      });
      upstream.on('data', (chunk) => {
        fromDaemon += chunk.toString('utf8');
        let nl: number;
        while ((nl = fromDaemon.indexOf('\n')) >= 0) {
          const line = fromDaemon.slice(0, nl + 1);
          fromDaemon = fromDaemon.slice(nl + 1);
          if (cutId !== undefined && (JSON.parse(line) as { id?: unknown }).id === cutId) {
            close();
            return;
          }
          client.write(line);
        }
      });
      client.on('close', close).on('error', close);
      upstream.on('close', close).on('error', close);
    });
  }

  /** A relay to the daemon at `target`, listening in a private (0700) directory of its own. */
  static async start(target: string): Promise<AnswerCutter> {
    const dir = await makeTempDir('yl-cut-');
    const cutter = new AnswerCutter(path.join(dir, 'relay.sock'), dir, target);
    await new Promise<void>((resolve, reject) => {
      cutter.#server.once('error', reject).listen(cutter.socketPath, resolve);
    });
    return cutter;
  }

  /** Lose the answer to the next append that passes. */
  cutNextAppend(): void {
    this.#armed = true;
  }

  async close(): Promise<void> {
    for (const s of this.#sockets) s.destroy();
    await new Promise<void>((resolve) => {
      this.#server.close(() => {
        resolve();
      });
    });
    await fs.rm(this.dir, { recursive: true, force: true });
  }
}
