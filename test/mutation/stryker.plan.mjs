// A Stryker config for scripts/mutation-plan.mjs: the repo's config (or the PostgreSQL one when
// MUT_PLAN_BASE=postgres) plus the 'plan' reporter, which writes what the run would test.
import leveldb from '../../stryker.config.mjs';
import postgres from '../../stryker.postgres.config.mjs';

const base = process.env.MUT_PLAN_BASE === 'postgres' ? postgres : leveldb;
export default {
  ...base,
  plugins: [...base.plugins, './test/mutation/plan-reporter.mjs'],
  reporters: ['plan'],
};
