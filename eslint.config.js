// ESLint: the recommended rules, typescript-eslint's type-aware checks that catch real bugs
// (a promise nobody awaits or catches; a promise handed where its result is ignored, such as an
// event handler), and size limits outside specs, test/ and bench/: functions of at most 80
// lines, a complexity of at most 15 and at most 5 parameters (more go in an options object; a
// Nest provider's constructor, whose parameters Nest injects by token, says so where it has
// more). Layout is Prettier's.
import eslint from '@eslint/js';
import prettier from 'eslint-config-prettier';
import tseslint from 'typescript-eslint';

/** The feature folders: each contributes its own Nest module, and none imports another. */
const FEATURE_FOLDERS = ['node-oversell', 'usage', 'status-coalescing', 'reconciler', 'plan', 'node-policy', 'pod-policy', 'sidecar'];
const FEATURES = FEATURE_FOLDERS.map((folder) => `../${folder}/**`);
/** The process around the modules (entry, HTTP edge, drain, limits, logging): nothing it starts imports it. */
const SERVER = '../server/**';

/**
 * A feature folder's boundary: it imports no other feature. What the node features share is in
 * domain/node-rules/ (the rules, their config, the plan) and reached by injection token
 * (domain/node-rules/node-services.ts), the Node and pod caches in kube/.
 */
function featureBoundary(folder) {
  const group = [...FEATURE_FOLDERS.filter((other) => other !== folder).map((other) => `../${other}/**`), SERVER];
  const message = `${folder}/ imports no other feature, nor server/: shared node rules and services are in domain/node-rules/, shared caches in kube/`;
  return { files: [`src/${folder}/**/*.ts`], message, group };
}

/** One `no-restricted-imports` block per folder: `group` is what its non-spec files may not import. */
function importBoundaries(boundaries) {
  return boundaries.map(({ files, message, group, allowTypeImports = false }) => ({
    files,
    ignores: ['**/*.spec.ts'],
    rules: { '@typescript-eslint/no-restricted-imports': ['error', { patterns: [{ group, message, allowTypeImports }] }] },
  }));
}

export default tseslint.config(
  { ignores: ['dist/', 'coverage/', 'node_modules/', '.tools/', 'test/e2e/.bin/', 'test/e2e/.run/', 'bench/.run/', 'scripts/.run/'] },
  // npm run test:mutation: Stryker's sandboxes (copies of the project while it runs) and reports.
  { ignores: ['.stryker-tmp/', 'reports/'] },
  eslint.configs.recommended,
  ...tseslint.configs.recommended,
  {
    // A disable comment that no longer silences anything fails: the exceptions stay the ones needed.
    linterOptions: { reportUnusedDisableDirectives: 'error' },
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
      // The errors rethrown name their cause's message, which is what an operator reads.
      'preserve-caught-error': 'off',
      complexity: ['error', 15],
      'max-params': ['error', 5],
      'max-lines-per-function': ['error', { max: 80, skipBlankLines: true, skipComments: true }],
    },
  },
  {
    // A describe block or a bench's main is a list of steps: its length measures coverage, not tangle.
    files: ['**/*.spec.ts', 'test/**/*.ts', 'bench/**/*.ts'],
    rules: { complexity: 'off', 'max-lines-per-function': 'off', 'max-params': 'off' },
  },
  {
    // What bench and the e2e suite share is in test/support/; the harness is the suite's own (its Vitest context).
    files: ['bench/**/*.ts'],
    rules: {
      '@typescript-eslint/no-restricted-imports': [
        'error',
        { patterns: [{ group: ['**/test/e2e/**'], message: 'bench imports what it shares with the e2e suite from test/support/.' }] },
      ],
    },
  },
  {
    // The build's Node scripts (plain JavaScript, no type information): Node's globals.
    files: ['scripts/**/*.js'],
    languageOptions: { globals: { process: 'readonly', console: 'readonly', fetch: 'readonly' } },
  },
  {
    // class-transformer keys its metadata by class constructor, typed `Function` there.
    files: ['src/common/validation.ts'],
    rules: { '@typescript-eslint/no-unsafe-function-type': 'off' },
  },
  // Module boundaries (docs/architecture.md, "Who may import whom"). Specs may wire anything.
  ...importBoundaries([
    {
      files: ['src/domain/**/*.ts'],
      message: 'domain/ holds the Kubernetes primitives every module may use: it imports only domain/ and common/',
      group: ['../*/**', '!../domain/**', '!../common/**', '../*.js'],
    },
    {
      // The same rule one folder down: the node rules the node features share.
      files: ['src/domain/node-rules/**/*.ts'],
      message: 'domain/node-rules/ is domain/: it imports only domain/ and common/',
      group: ['../../*/**', '!../../domain/**', '!../../common/**', '../../*.js'],
    },
    {
      // The bottom layer: every other folder may import it, so it imports none of them (types included).
      files: ['src/common/**/*.ts'],
      message: 'common/ imports nothing of src/ outside common/: what needs domain/, admission/ or a feature belongs there',
      group: ['../*/**', '!../common/**', '../*.js'],
    },
    {
      files: ['src/kube/**/*.ts'],
      message: 'kube/ (the API client, informers, shared caches) imports neither config/ nor a feature nor server/',
      group: [...FEATURES, '../config/**', SERVER, '../*.js'],
    },
    {
      files: ['src/config/**/*.ts'],
      message: 'config/ knows no feature: the root schema (src/overcommit.config.ts) is handed to ConfigModule.forRoot, and only its type is imported here',
      group: [...FEATURES, SERVER, '../*.js'],
      allowTypeImports: true,
    },
    {
      files: ['src/admission/**/*.ts'],
      message: 'admission/ imports no feature, nor server/: it discovers the strategies at bootstrap',
      group: [...FEATURES, SERVER, '../*.js'],
      allowTypeImports: true,
    },
    {
      // main.ts, the app factory, the edge: they start what app.module.ts composes.
      files: ['src/server/**/*.ts'],
      message: 'server/ (the process: entry, HTTP edge, drain, limits, logging) imports no feature: the features come in through app.module.ts',
      group: [...FEATURES],
    },
    ...FEATURE_FOLDERS.map(featureBoundary),
  ]),
  {
    files: ['**/*.js'],
    extends: [tseslint.configs.disableTypeChecked],
  },
  prettier,
);
