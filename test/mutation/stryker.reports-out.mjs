// The repo's stryker.config.mjs with the JSON and HTML reports written where $MUT_REPORT says
// (a path without extension), so parallel runs of several sessions do not overwrite
// reports/mutation/. Run from the repo root:
//   MUT_REPORT=/work/mutation-results/me/run npx stryker run test/mutation/stryker.reports-out.mjs --mutate … --testFiles …
import base from '../../stryker.config.mjs';

const out = process.env.MUT_REPORT ?? 'reports/mutation/mutation';
process.env.MUT_CHECKPOINT_FILE ||= `${out}.checkpoint.jsonl`;
export default { ...base, jsonReporter: { fileName: `${out}.json` }, htmlReporter: { fileName: `${out}.html` } };
