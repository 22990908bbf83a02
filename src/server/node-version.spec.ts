import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { REQUIRED_NODE_MAJOR, unsupportedNode } from './node-version.js';

const root = new URL('../../', import.meta.url);
const packageJson = JSON.parse(readFileSync(new URL('package.json', root), 'utf8'));

describe('unsupportedNode', () => {
  it('accepts the required major and later ones', () => {
    expect(unsupportedNode(`${REQUIRED_NODE_MAJOR}.0.0`)).toBeUndefined();
    expect(unsupportedNode('26.1.0')).toBeUndefined();
  });

  it('names the version and what to do, on one line, for an older Node', () => {
    const message = unsupportedNode('20.20.2');
    expect(message).toContain(`needs Node.js >= ${REQUIRED_NODE_MAJOR}, this is 20.20.2`);
    expect(message).toContain('npm start');
    expect(message).not.toContain('\n');
    expect(unsupportedNode('18.19.0')).toBeDefined();
  });
});

describe('the Node version, pinned in one place per tool', () => {
  it('engines, .nvmrc and the `node` dev dependency (which npm scripts run on) agree with the check', () => {
    const pinned: string = packageJson.devDependencies.node;
    expect(pinned).toMatch(/^\d+\.\d+\.\d+$/);
    expect(Number(pinned.split('.')[0])).toBe(REQUIRED_NODE_MAJOR);
    expect(readFileSync(new URL('.nvmrc', root), 'utf8').trim()).toBe(pinned);
    expect(packageJson.engines.node).toBe(`>=${REQUIRED_NODE_MAJOR}`);
  });
});
