// One headless Chromium (Debian's, through playwright-core) for a test file, and where its
// screenshots go: a temp dir in `npm test`, which leaves the tree as it found it, and
// docs/console/*.png (shown in docs/console.md) when `npm run docs:screenshots` asks for them
// ($YELLO_SCREENSHOTS_DIR).

import { mkdirSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { chromium, type Browser } from 'playwright-core';
import { afterAll, beforeAll } from 'vitest';
import { repoRoot } from '../helpers/daemon-process.js';

/** Debian's chromium (`.ci/run` installs it); $CHROMIUM_PATH points elsewhere. */
export const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
export const SCREENSHOTS = process.env.YELLO_SCREENSHOTS_DIR
  ? path.resolve(repoRoot, process.env.YELLO_SCREENSHOTS_DIR)
  : path.join(os.tmpdir(), 'yello-console-screenshots');

/**
 * Launches the browser in beforeAll and closes it in afterAll. `evil.test` resolves to
 * 127.0.0.1 inside it, so a test can reach the console under a name it must refuse.
 */
export function useBrowser(): () => Browser {
  let browser: Browser | undefined;
  beforeAll(async () => {
    mkdirSync(SCREENSHOTS, { recursive: true });
    browser = await chromium.launch({
      executablePath: CHROMIUM,
      headless: true,
      args: ['--host-resolver-rules=MAP evil.test 127.0.0.1', '--disable-gpu'],
    });
  }, 60_000);
  afterAll(async () => {
    await browser?.close();
  });
  return () => {
    if (!browser) throw new Error('useBrowser: the browser exists only inside hooks and tests');
    return browser;
  };
}

/** A screenshot's path under SCREENSHOTS. */
export function screenshot(name: string): string {
  return path.join(SCREENSHOTS, `${name}.png`);
}
