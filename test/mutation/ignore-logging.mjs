// Stryker ignorer plugin (stryker.config.mjs `ignorers: ['logging']`): no mutant inside a pino
// log call (`log.info(...)`, `this.#log.warn(...)`, `this.#opts.log.error(...)`). Logs carry no
// promise of docs/protocol.md and no test reads their wording, so mutating their objects and
// messages only adds survivors that mean nothing. The statement itself is still there: a
// mutant that removes a block containing it is still made.
import { PluginKind, declareValuePlugin } from '@stryker-mutator/api/plugin';

const LEVELS = new Set(['trace', 'debug', 'info', 'warn', 'error', 'fatal']);

function isLogger(node) {
  if (node.type === 'Identifier') return node.name === 'log' || node.name === 'logger';
  if (node.type === 'MemberExpression') {
    const p = node.property;
    return (p.type === 'Identifier' || p.type === 'PrivateName') && /^(log|logger)$/.test(p.name ?? p.id?.name);
  }
  return false;
}

export const strykerPlugins = [
  declareValuePlugin(PluginKind.Ignore, 'logging', {
    shouldIgnore(path) {
      if (!path.isExpressionStatement()) return undefined;
      const call = path.node.expression;
      if (call.type !== 'CallExpression' || call.callee.type !== 'MemberExpression') return undefined;
      const { object, property } = call.callee;
      if (property.type !== 'Identifier' || !LEVELS.has(property.name) || !isLogger(object)) return undefined;
      return 'a log call: no promise to guard';
    },
  }),
];
