// ESLint: the recommended rules, typescript-eslint's type-aware checks that catch real bugs
// (a promise nobody awaits or catches; a promise handed where its result is ignored, such as an
// event handler), and size limits tuned so today's well-factored units pass. Layout is Prettier's.
import eslint from '@eslint/js';
import prettier from 'eslint-config-prettier';
import tseslint from 'typescript-eslint';

export default tseslint.config(
  { ignores: ['dist/', 'coverage/', 'node_modules/', '.tools/', 'test/e2e/.bin/', 'test/e2e/.run/', 'bench/.run/'] },
  eslint.configs.recommended,
  ...tseslint.configs.recommended,
  {
    languageOptions: {
      // tsconfig.test.json covers src/, test/, bench/ and vitest.config.ts.
      parserOptions: { project: './tsconfig.test.json', tsconfigRootDir: import.meta.dirname },
    },
    rules: {
      '@typescript-eslint/no-floating-promises': 'error',
      '@typescript-eslint/no-misused-promises': 'error',
      // Parsed JSON (AdmissionReview objects, API responses) is typed `any` where it is read.
      '@typescript-eslint/no-explicit-any': 'off',
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_', ignoreRestSiblings: true }],
      // A `let x!: T` assigned once after the closures that read it are built (app.factory.ts).
      'prefer-const': ['error', { ignoreReadBeforeAssign: true }],
      // The errors rethrown name their cause's message, which is what an operator reads.
      'preserve-caught-error': 'off',
      complexity: ['error', 26],
      'max-lines-per-function': ['error', { max: 120, skipBlankLines: true, skipComments: true }],
    },
  },
  {
    // A describe block or a bench's main is a list of steps: its length measures coverage, not tangle.
    files: ['**/*.spec.ts', 'test/**/*.ts', 'bench/**/*.ts'],
    rules: { complexity: 'off', 'max-lines-per-function': 'off' },
  },
  {
    // planNodeStatus applies the six node rules in one pass, each branch a rule.
    files: ['src/node-oversell/node-oversell.rules.ts'],
    rules: { complexity: ['error', 35] },
  },
  {
    // class-transformer keys its metadata by class constructor, typed `Function` there.
    files: ['src/common/validation.ts'],
    rules: { '@typescript-eslint/no-unsafe-function-type': 'off' },
  },
  {
    files: ['**/*.js'],
    extends: [tseslint.configs.disableTypeChecked],
  },
  prettier,
);
