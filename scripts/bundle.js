// The second half of `npm run build`: after `nest build` compiles src/ into dist/, esbuild folds
// the server's entry, dist/server/main.js (src/server/main.ts), and everything it imports into one
// file, dist/main.js, which is what the image, the e2e tests and the benchmarks run
// (`node dist/main.js`).
//
// Why: Node's module loader spends most of a cold start resolving, reading and linking, one by
// one, the files the server imports (@kubernetes/client-node's most of all), and V8 keeps every
// module's source text, comments included, for as long as the process lives. One file without
// comments or whitespace, with the compile cache the image fills (scripts/warm-compile-cache.js),
// answers its first review sooner and holds less memory (docs/adr/0002-bundled-dist-main.md). The
// same libraries do the same work: nothing is replaced or stubbed.
//
// dist/server/main.js, dist/cli.js and the other compiled modules stay as tsc wrote them
// (`kube-overcommit plan`, and `npm run start:dev`, which does not bundle and runs
// dist/server/main.js: nest-cli.json's entryFile).
import { build } from 'esbuild';
import { builtinsByRequire, lazyNestDateTimeFormatter, lazyModules, requireBanner } from './bundle-plugins.js';

// Left to Node's own resolution from node_modules at run time:
const external = [
  // Nest loads these only for features this server does not use (microservices, websockets,
  // Express, static files, views, multipart); they are not installed.
  '@nestjs/microservices',
  '@nestjs/websockets',
  '@nestjs/platform-express',
  '@fastify/static',
  '@fastify/view',
  '@fastify/multipart',
  // src/common/validation.ts reads class-transformer's store of @Type targets through Node's
  // require(): the decorators must register in that same copy, not in a bundled one.
  'class-transformer',
  // pino starts its transports (pino-pretty on a developer's terminal) as worker threads from files
  // beside its own code, which a bundle does not have.
  'pino',
  'pino-pretty',
  // The code every admission call runs through: Fastify and its JSON parser, the patch check.
  // Bundled, they cost more CPU per node review (measured twice, not explained: the CPU profiles of
  // the two builds look alike; docs/adr/0002-bundled-dist-main.md, and "One bundled file and a
  // warmed compile cache" and "Fifth pass" in git log -p docs/performance.md); as Node's own
  // modules they cost what they did before, and the rest of the
  // bundle keeps most of the start-up and memory gain. prom-client is bundled: since the metrics
  // are kept apart from the path (admission.metrics.ts) no admission call runs its code.
  'fastify',
  'secure-json-parse',
  'fast-json-patch',
];
// @willsoto/nestjs-prometheus is bundled too: it only defines Nest modules and providers, and as a
// Node module its require('@nestjs/common') loaded a second copy of Nest's
// common package from node_modules, and with it rxjs's CommonJS build (226 files): about 80 ms of
// every start and 10 MiB of RSS (docs/performance.md, "Start-up and idle memory").

await build({
  entryPoints: ['dist/server/main.js'],
  outfile: 'dist/main.js',
  bundle: true,
  platform: 'node',
  format: 'esm',
  target: 'node24',
  external,
  plugins: [lazyNestDateTimeFormatter, builtinsByRequire, lazyModules],
  banner: { js: requireBanner },
  // Whitespace and syntax only: identifiers stay as written, so stack traces and Nest's logs
  // (which print class names) read as in the source; keepNames keeps `Function.name` exact.
  minifyWhitespace: true,
  minifySyntax: true,
  keepNames: true,
  legalComments: 'none',
  // Chained through tsc's own maps to src/: `node --enable-source-maps dist/main.js` prints
  // stack traces in TypeScript.
  sourcemap: 'linked',
  logLevel: 'warning',
});
