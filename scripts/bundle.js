// The second half of `npm run build`: after `nest build` compiles src/ into dist/, esbuild folds
// dist/main.js and everything it imports into one file, written over dist/main.js, which is what
// the image, the e2e tests and the benchmarks run (`node dist/main.js`).
//
// Why: Node's module loader spends most of a cold start resolving, reading and linking, one by
// one, the files the server imports (@kubernetes/client-node's most of all), and V8 keeps every
// module's source text, comments included, for as long as the process lives. One file without
// comments or whitespace, with the compile cache the image fills (scripts/warm-compile-cache.js),
// answers its first review sooner and holds less memory (docs/performance.md, "One bundled file
// and a warmed compile cache"). The same libraries do the same work: nothing is replaced or stubbed.
//
// dist/cli.js and the other compiled modules stay as tsc wrote them (`kube-overcommit plan`, and
// `npm run start:dev`, which does not bundle).
import { readFile } from 'node:fs/promises';
import { build } from 'esbuild';

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
  // Nest require()s class-validator and class-transformer itself; a second, bundled copy would
  // keep its own decorator metadata, and validation would see none of ours.
  'class-validator',
  'class-transformer',
  // pino starts its transports (pino-pretty on a developer's terminal) as worker threads from files
  // beside its own code, which a bundle does not have.
  'pino',
  'pino-pretty',
  // The code every admission call runs through: Fastify and its JSON parser, the patch check and
  // the metrics. Bundled, they cost more CPU per node review (measured, not explained: the CPU
  // profiles of the two builds look alike; docs/performance.md, "One bundled file and a warmed
  // compile cache"); as Node's own modules they cost what they did before, and the rest of the
  // bundle keeps most of the start-up and memory gain.
  'fastify',
  'secure-json-parse',
  'fast-json-patch',
  'prom-client',
];
// Not @willsoto/nestjs-prometheus, though it is a metrics package: it only defines Nest modules and
// providers, and as a Node module its require('@nestjs/common') loaded a second copy of Nest's
// common package from node_modules, and with it rxjs's CommonJS build (226 files): about 80 ms of
// every start and 10 MiB of RSS (docs/performance.md, "Start-up and idle memory").

// Nest's two loggers build an Intl.DateTimeFormat when their module loads, for the timestamp of a
// line they print. Building one reads ICU's data for every available locale: 4.7 MiB of the node
// binary's pages made resident and about 12 ms of start-up, in a server that logs through pino and
// never prints a Nest console line in a pod. The formatter is built on its first use instead, with
// the same arguments; the build fails if Nest's code no longer has the line, rather than bundle
// it unchanged.
const NEST_FORMATTER = 'const dateTimeFormatter = new Intl.DateTimeFormat(';
const lazyNestDateTimeFormatter = {
  name: 'lazy-nest-date-time-formatter',
  setup(build) {
    build.onLoad({ filter: /@nestjs[\\/]common[\\/]services[\\/](console-)?logger\.service\.js$/ }, async (args) => {
      const source = await readFile(args.path, 'utf8');
      if (!source.includes(NEST_FORMATTER)) throw new Error(`${args.path}: no \`${NEST_FORMATTER}\` to defer (Nest changed: review scripts/bundle.js)`);
      const lazy =
        'const dateTimeFormatter = ((...args) => { let formatter; return { format: (date) => (formatter ??= new Intl.DateTimeFormat(...args)).format(date) }; })(';
      return { contents: source.replace(NEST_FORMATTER, lazy), loader: 'js' };
    });
  },
};

await build({
  entryPoints: ['dist/main.js'],
  outfile: 'dist/main.js',
  allowOverwrite: true,
  bundle: true,
  platform: 'node',
  format: 'esm',
  target: 'node24',
  external,
  plugins: [lazyNestDateTimeFormatter],
  // CommonJS packages inside an ES module bundle call require(): give them Node's, rooted here so
  // that the external packages resolve from node_modules.
  banner: { js: "import { createRequire as __createRequire } from 'node:module'; const require = __createRequire(import.meta.url);" },
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
