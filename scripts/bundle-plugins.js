// The esbuild plugins of scripts/bundle.js, each a change to what the bundle loads at start-up and
// nothing else (test/app/bundle.test.ts bundles a module with them and runs it).
import { readFile } from 'node:fs/promises';
import { builtinModules } from 'node:module';

// CommonJS packages inside an ES module bundle call require(): give them Node's, rooted at the
// bundle so that the external packages resolve from node_modules.
export const requireBanner = "import { createRequire as __createRequire } from 'node:module'; const require = __createRequire(import.meta.url);";

// Nest's two loggers build an Intl.DateTimeFormat when their module loads, for the timestamp of a
// line they print. Building one reads ICU's data for every available locale: 4.7 MiB of the node
// binary's pages made resident and about 12 ms of start-up, in a server that logs through pino and
// never prints a Nest console line in a pod. The formatter is built on its first use instead, with
// the same arguments; the build fails if Nest's code no longer has the line, rather than bundle
// it unchanged.
const NEST_FORMATTER = 'const dateTimeFormatter = new Intl.DateTimeFormat(';
export const lazyNestDateTimeFormatter = {
  name: 'lazy-nest-date-time-formatter',
  setup(build) {
    build.onLoad({ filter: /@nestjs[\\/]common[\\/]services[\\/](console-)?logger\.service\.js$/ }, async (args) => {
      const source = await readFile(args.path, 'utf8');
      if (!source.includes(NEST_FORMATTER)) throw new Error(`${args.path}: no \`${NEST_FORMATTER}\` to defer (Nest changed: review scripts/bundle-plugins.js)`);
      const lazy =
        'const dateTimeFormatter = ((...args) => { let formatter; return { format: (date) => (formatter ??= new Intl.DateTimeFormat(...args)).format(date) }; })(';
      return { contents: source.replace(NEST_FORMATTER, lazy), loader: 'js' };
    });
  },
};

// A builtin that the bundle's ES modules import is require()d instead: `import … from 'node:http'`
// makes Node build the module's ES facade, which reads every export, lazy getters included:
// node:http's WebSocket, CloseEvent and MessageEvent load Node's own copy of undici (about 17 ms of
// every start, in a server that never uses them), util's TextDecoder the text codecs. The same
// object either way, its getters left unread until something uses them.
const builtins = new Set(builtinModules.flatMap((name) => [name, `node:${name}`]));
export const builtinsByRequire = {
  name: 'builtins-by-require',
  setup(build) {
    build.onResolve({ filter: /^[^./]/ }, (args) =>
      args.kind === 'import-statement' && builtins.has(args.path) ? { path: args.path, namespace: 'builtin-by-require' } : undefined,
    );
    build.onLoad({ filter: /.*/, namespace: 'builtin-by-require' }, (args) => ({
      contents: `module.exports = require(${JSON.stringify(args.path)});`,
      loader: 'js',
    }));
  },
};

// Modules that a bundled package require()s when it loads, for a feature nothing here uses, each
// worth milliseconds of every start:
// - libphonenumber-js's full metadata, which class-validator loads for @IsPhoneNumber (about 25 ms);
// - @opentelemetry/api, which prom-client loads to attach trace ids to exemplars (about 10 ms), for
//   a metric created with `enableExemplars`, which none is.
// Each gets a stand-in that require()s the real module at the first property read, so that the
// feature, if used, still runs the real library.
const LAZY_MODULES = new Set(['libphonenumber-js/max', '@opentelemetry/api']);
export const lazyModules = {
  name: 'lazy-modules',
  setup(build) {
    // The stand-in's own require() is the real module, left to Node.
    build.onResolve({ filter: /^[^./]/ }, (args) => {
      if (!LAZY_MODULES.has(args.path)) return undefined;
      return args.namespace === 'lazy-module' ? { path: args.path, external: true } : { path: args.path, namespace: 'lazy-module' };
    });
    build.onLoad({ filter: /.*/, namespace: 'lazy-module' }, (args) => ({
      contents: `let real; module.exports = new Proxy({}, { get: (_, key) => (real ??= require(${JSON.stringify(args.path)}))[key] });`,
      loader: 'js',
    }));
  },
};
