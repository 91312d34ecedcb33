// Stryker ignorer plugin (stryker.config.mjs `ignorers: [..., 'error-messages']`): no mutant of
// the human text handed to an error constructor. docs/protocol.md §3 binds an error's `code`,
// `data.type` and the `data` members it names (`path`, the enumerated `reason`s of
// PERMISSION_DENIED, INVALID_RECEIPT, CONTINUITY_BREAK, STORAGE_FAILURE, ...), never the wording
// of `message`; mutating that wording ("" or "Stryker was here!") only adds survivors that
// mean nothing. Ignored, exactly (a string or template literal in that argument position):
//   - `errors.invalidParams(path, reason)`: `reason`. §3 names the member but gives no values:
//     it is a sentence for a person ("the author releases with its coordinator token"). `path`
//     is contract and still mutated.
//   - `errors.permissionDenied(reason, message)`: `message` (the enumerated `reason` is mutated).
//   - `errors.storageFailure(operationId, reason, message)`: `message`.
//   - `new YelloError(type, message, …)`: `message`; `new Error(message)` (internal errors,
//     never answered with their text: the RPC boundary maps them to INTERNAL).
// Everything else in the call (the condition that throws, the error type, the other
// arguments) is still mutated.
import { PluginKind, declareValuePlugin } from '@stryker-mutator/api/plugin';

/** callee name → index of its message argument. */
const ERRORS_MEMBERS = new Map([
  ['invalidParams', 1],
  ['permissionDenied', 1],
  ['storageFailure', 2],
]);
const CONSTRUCTORS = new Map([
  ['YelloError', 1],
  ['Error', 0],
]);

function messageIndex(call) {
  const callee = call.callee;
  if (call.type === 'NewExpression' && callee.type === 'Identifier') return CONSTRUCTORS.get(callee.name);
  if (
    call.type === 'CallExpression' &&
    callee.type === 'MemberExpression' &&
    callee.object.type === 'Identifier' &&
    callee.object.name === 'errors' &&
    callee.property.type === 'Identifier'
  ) {
    return ERRORS_MEMBERS.get(callee.property.name);
  }
  return undefined;
}

export const strykerPlugins = [
  declareValuePlugin(PluginKind.Ignore, 'error-messages', {
    shouldIgnore(path) {
      if (!path.isStringLiteral() && !path.isTemplateLiteral()) return undefined;
      const parent = path.parentPath;
      if (!parent || (!parent.isCallExpression() && !parent.isNewExpression())) return undefined;
      const index = messageIndex(parent.node);
      if (index === undefined || parent.node.arguments[index] !== path.node) return undefined;
      return 'the human message of an error: not part of the contract';
    },
  }),
];
