// What a test passes to a child it spawns with an environment of its own (not process.env), so
// that the mutation run reaches it too: the active mutant, or in the dry run the coverage dump
// and its preload (child-mutants.ts sets them). Empty outside a mutation run. Without it the
// `yello mcp` children of the MCP tests (the SDK's stdio transport passes only a short default
// environment) never ran a mutant, and every mutant only they reached survived.
const NAMES = ['__STRYKER_ACTIVE_MUTANT__', 'STRYKER_YELLO_COVERAGE_DIR'] as const;

export function childMutationEnv(): Record<string, string> {
  const env: Record<string, string> = {};
  for (const name of NAMES) {
    const value = process.env[name];
    if (value !== undefined) env[name] = value;
  }
  // The coverage preload rides on NODE_OPTIONS; pass it only along with the dump dir.
  if (env.STRYKER_YELLO_COVERAGE_DIR !== undefined && process.env.NODE_OPTIONS) env.NODE_OPTIONS = process.env.NODE_OPTIONS;
  return env;
}
