import { defineConfig } from 'vitest/config';

// `npm run test:agent-clis`: yello setup against the real claude, codex and gemini binaries,
// installed from test/agent-clis/package-lock.json. Not part of npm test (the main config
// excludes this directory): the three programs are ~800 MB and start slowly.
export default defineConfig({
  test: {
    include: ['test/agent-clis/*.test.ts'],
    testTimeout: 300_000,
    hookTimeout: 60_000,
    maxWorkers: 1,
  },
});
