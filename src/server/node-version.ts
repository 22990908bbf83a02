/**
 * The Node.js this server needs, checked before anything else loads: on an older Node the
 * Kubernetes client's HTTP stack fails deep inside undici, with an error that does not name
 * the cause. main.ts imports this module first, so the check runs before client-node is
 * evaluated. Kept equal to package.json's `engines.node` and `.nvmrc` (node-version.spec.ts).
 */
export const REQUIRED_NODE_MAJOR = 24;

/** One line saying what to do, or undefined when `version` (process.versions.node) will do. */
export function unsupportedNode(version: string): string | undefined {
  const major = Number(version.split('.')[0]);
  if (major >= REQUIRED_NODE_MAJOR) return undefined;
  return (
    `kube-overcommit needs Node.js >= ${REQUIRED_NODE_MAJOR}, this is ${version}: ` +
    'run it through npm (`npm ci` installs Node 24 into node_modules/.bin and `npm start` uses it), or `nvm use`'
  );
}

const problem = unsupportedNode(process.versions.node);
if (problem) {
  process.stderr.write(`${problem}\n`);
  process.exit(1);
}
