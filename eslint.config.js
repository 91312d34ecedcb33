// typescript-eslint, strict and type-checked (the style guide's habits: no floating promises,
// exhaustive switches). `npm run lint`; part of `npm run check`.
import js from '@eslint/js';
import tseslint from 'typescript-eslint';

export default tseslint.config(
  {
    ignores: [
      '.stryker-tmp/**',
      '.stryker-tmp-*/**',
      'reports/**',
      'dist/**',
      'node_modules/**',
      'coverage/**',
      'bench/**',
      'examples/**',
      'scripts/**',
      '**/*.mjs',
      '**/*.js',
      '**/*.d.ts',
    ],
  },
  js.configs.recommended,
  ...tseslint.configs.strictTypeChecked,
  {
    languageOptions: {
      parserOptions: {
        projectService: {
          allowDefaultProject: ['vitest.config.ts', 'vitest.mutation.config.ts', 'vitest.postgres.config.ts'],
        },
        tsconfigRootDir: import.meta.dirname,
      },
    },
    rules: {
      '@typescript-eslint/no-floating-promises': 'error',
      '@typescript-eslint/switch-exhaustiveness-check': 'error',
      '@typescript-eslint/restrict-template-expressions': ['error', { allowNumber: true, allowBoolean: true, allowNullish: true }],
    },
  },
  {
    // Tests: a `!` after the test has just asserted the value is there is the clearest way to say
    // so, and vitest's matchers take methods unbound by design.
    files: ['test/**/*.ts'],
    rules: {
      '@typescript-eslint/no-non-null-assertion': 'off',
      '@typescript-eslint/unbound-method': 'off',
    },
  },
);
