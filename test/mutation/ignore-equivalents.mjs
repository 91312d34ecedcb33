// Stryker ignorer plugin (stryker.config.mjs `ignorers: [..., 'argued-equivalents']`): mutants
// argued equivalent in test/MUTATION.md are reported Ignored, with the argument's place as the
// reason, instead of being run again. A survivor is the most expensive mutant there is: it
// runs every test file whose daemon reached it (4–5 minutes through the daemons), and
// Stryker's incremental mode runs it again whenever a new test covers it, which after every
// change to a test file of the daemon is most of them.
//
// The list is test/mutation/equivalents.tsv (scripts/mutation-equivalents.mjs writes and
// checks it): file, line, mutator names, the line's code (trimmed), reason. A row applies to
// the line whose code is the row's (the given line, else the one line with that code): a
// changed line no longer matches, so its mutants are tested again, and the script's check
// reports the row as ignoring nothing. Only whole groups are listed: every mutant of those mutators starting on that
// line survived, since Stryker's directive below cannot tell two mutants of one mutator on a
// line apart.
//
// How: Stryker has no per-mutant exclusion, but it reads `// Stryker disable next-line <mutators>:
// <reason>` comments from the AST as it walks it. This plugin adds such a comment to the first
// node of each listed line just before the walk reaches it (see `place`), so the source files
// stay free of mutation-tool comments. It never ignores a node itself.
//
// test/mutation/stryker.files.mjs does not use it: a mutant equivalent under one test set or
// backend may be killed under another (subscriptions.ts once, on PostgreSQL), so a comparison
// runs every mutant.
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { PluginKind, declareValuePlugin } from '@stryker-mutator/api/plugin';

const DEFAULT_LIST = fileURLToPath(new URL('./equivalents.tsv', import.meta.url));

/** The rows of an equivalents list, by file: `{ line, mutators, code, reason }`. */
export function parseEquivalents(text) {
  const byFile = new Map();
  for (const raw of text.split('\n')) {
    if (raw.trim() === '' || raw.startsWith('#')) continue;
    const [file, line, mutators, code, reason] = raw.split('\t');
    if (!file || !line || !mutators || code === undefined) throw new Error(`equivalents.tsv: bad row: ${raw}`);
    const rows = byFile.get(file) ?? [];
    rows.push({ line: Number(line), mutators: mutators.split(','), code, reason: reason ?? 'argued equivalent in test/MUTATION.md' });
    byFile.set(file, rows);
  }
  return byFile;
}

/**
 * The line (1-based) a row applies to in `lines`: its own if the code is there; else the one
 * line with that code (code moved by an edit above it); else none. Code on several lines that
 * is not at the row's line matches none of them: which one was argued is not known.
 */
export function lineOf(row, lines) {
  if (lines[row.line - 1]?.trim() === row.code) return row.line;
  const found = [];
  lines.forEach((l, i) => {
    if (l.trim() === row.code) found.push(i + 1);
  });
  return found.length === 1 ? found[0] : undefined;
}

const loaded = new Map();
function listFor(relativeFile) {
  const file = process.env.MUT_EQUIVALENTS ?? DEFAULT_LIST;
  if (!loaded.has(file)) loaded.set(file, existsSync(file) ? parseEquivalents(readFileSync(file, 'utf8')) : new Map());
  return loaded.get(file).get(relativeFile);
}

/**
 * Nodes whose own mutants, if any, never print their children (a block becomes `{}`; statements
 * and declarations are not mutated themselves, their parts are).
 */
const NO_COPIES = new Set([
  'Program',
  'BlockStatement',
  'ExpressionStatement',
  'VariableDeclaration',
  'VariableDeclarator',
  'ReturnStatement',
  'ThrowStatement',
  'IfStatement',
  'ForStatement',
  'ForOfStatement',
  'ForInStatement',
  'WhileStatement',
  'DoWhileStatement',
  'SwitchStatement',
  'SwitchCase',
  'TryStatement',
  'CatchClause',
  'ClassBody',
  'ObjectProperty',
  'ObjectExpression',
  'ArrayExpression',
]);

/** The directive comment for a line's rows. */
function directive(target, loc) {
  return {
    type: 'CommentLine',
    value: ` Stryker disable next-line ${[...target.mutators].join(',')}: ${[...target.reasons].join('; ')}`,
    loc,
  };
}

/**
 * The lines of the file being instrumented that still wait for their directive: the first node
 * of the line (`node`), its parent, and the comment. Stryker instruments one file at a time.
 */
let pending = [];

/**
 * When to add a line's directive, and when to take it off. Stryker, entering a node, reads its
 * directives, then asks the ignorers, then makes the node's mutants, printing each replacement
 * (a deep copy of the node with its comments). A directive on the line's first node while an
 * ancestor's mutants are made would be printed into their replacements (their identity in the
 * reports: mutator, place, replacement); while its own are made, into theirs. So it is added
 * once the parent's mutants are made and an earlier sibling's subtree is being entered, and
 * taken off when the node itself is asked about, just after Stryker read it. When the node is
 * its parent's first child there is no earlier sibling: it is added when the parent is asked
 * about if no mutant of the parent copies its children (NO_COPIES); otherwise the line is not
 * ignored (the checker reports the row as ignoring nothing). test/unit/mutation-equivalents.test.ts
 * checks that the committed list changes no mutant's identity.
 */
function place(nodePath) {
  const node = nodePath.node;
  for (const p of pending) {
    if (p.node === node) {
      if (p.comment) node.leadingComments = node.leadingComments.filter((c) => c !== p.comment);
      p.done = true;
    } else if (!p.comment && (nodePath.parentPath?.node === p.parent || (node === p.parent && NO_COPIES.has(node.type)))) {
      p.comment = directive(p.target, p.node.loc);
      (p.node.leadingComments ??= []).push(p.comment);
    }
  }
  pending = pending.filter((p) => !p.done);
}

export const strykerPlugins = [
  declareValuePlugin(PluginKind.Ignore, 'argued-equivalents', {
    shouldIgnore(nodePath) {
      if (!nodePath.isProgram()) {
        if (pending.length) place(nodePath);
        return undefined;
      }
      pending = [];
      const file = nodePath.hub?.file;
      const fileName = file?.opts?.filename;
      if (!fileName || typeof file.code !== 'string') return undefined;
      const rows = listFor(path.relative(process.cwd(), fileName).split(path.sep).join('/'));
      if (!rows) return undefined;
      const lines = file.code.split('\n');
      const targets = new Map();
      for (const row of rows) {
        const at = lineOf(row, lines);
        if (at === undefined) continue;
        const t = targets.get(at) ?? { mutators: new Set(), reasons: new Set() };
        for (const m of row.mutators) t.mutators.add(m);
        t.reasons.add(row.reason);
        targets.set(at, t);
      }
      const seen = new Set();
      nodePath.traverse({
        enter(p) {
          const at = p.node.loc?.start.line;
          if (at === undefined || seen.has(at) || !targets.has(at)) return;
          seen.add(at);
          pending.push({ node: p.node, parent: p.parentPath.node, target: targets.get(at), comment: null, done: false });
        },
      });
      // A program has no mutants of its own: a line whose first node is a top-level statement gets its directive now.
      place(nodePath);
      return undefined;
    },
  }),
];
