import { ESLint } from 'eslint';
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';

/**
 * docs/architecture.md's "Who may import whom" table against the ESLint boundary rules
 * (eslint.config.js): for every folder of src/, a value import of every other folder is linted
 * as if written in it, and what passes must be what the table says.
 */
const DOC = new URL('../../docs/architecture.md', import.meta.url);

/** Rows of the table: folder → the entries of its "may import" cell (`folder/` or `folder/file.ts`). */
function readTable(): Map<string, string[]> {
  const text = readFileSync(DOC, 'utf8');
  const section = text.slice(text.indexOf('### Who may import whom'));
  const rows = section
    .split('\n')
    .filter((line) => /^\| `[a-z-]+\/` \|/.test(line))
    .map((line) => line.split('|').map((cell) => cell.trim()));
  return new Map(rows.map(([, folder, allowed]) => [folder.replaceAll('`', '').replace(/\/$/, ''), [...allowed.matchAll(/`([^`]+)`/g)].map((m) => m[1])]));
}

describe('docs/architecture.md, "Who may import whom"', () => {
  const table = readTable();
  const folders = [...table.keys()];
  const eslint = new ESLint({
    overrideConfig: { languageOptions: { parserOptions: { project: false, projectService: false } } },
    ruleFilter: ({ ruleId }) => ruleId === '@typescript-eslint/no-restricted-imports',
  });

  /** Which of `targets` (paths relative to src/) a file in `folder` may import, by ESLint. */
  async function allowedBy(folder: string, targets: string[]): Promise<string[]> {
    const code = targets.map((target, i) => `import { x${i} } from '../${target.replace(/\.ts$/, '.js')}';\nexport { x${i} };`).join('\n');
    const [result] = await eslint.lintText(code, { filePath: `src/${folder}/architecture-probe.ts` });
    expect(result.messages.filter((m) => m.ruleId !== '@typescript-eslint/no-restricted-imports')).toEqual([]);
    const refused = new Set(result.messages.map((m) => Math.floor((m.line - 1) / 2)));
    return targets.filter((_, i) => !refused.has(i));
  }

  it('lists every folder of src/', () => {
    const inSrc = [...readFileSync(new URL('../../eslint.config.js', import.meta.url), 'utf8').matchAll(/src\/([a-z-]+)\/\*\*\/\*\.ts/g)].map((m) => m[1]);
    for (const folder of inSrc) expect(folders, folder).toContain(folder);
    expect(folders.length).toBeGreaterThanOrEqual(12);
  });

  it('holds domain/node-rules/ to the rule of domain/', async () => {
    // allowedBy imports `../<target>`: from src/domain/node-rules/, `../x` is domain/x and `../../x` is src/x.
    const others = folders.filter((other) => other !== 'domain').map((other) => `../${other}/probe.ts`);
    const allowed = others.filter((target) => table.get('domain')!.includes(target.slice(3, -'probe.ts'.length)));
    expect(allowed).toEqual(['../common/probe.ts']);
    const targets = [...others, '../overcommit.config.ts', 'quantity.ts', 'node-rules/node-services.ts'];
    expect(await allowedBy('domain/node-rules', targets)).toEqual([...allowed, 'quantity.ts', 'node-rules/node-services.ts']);
  });

  it('says exactly what ESLint lets each folder import', async () => {
    for (const [folder, cell] of table) {
      const others = folders.filter((other) => other !== folder);
      // A file named in the cell is allowed alone: any other file of its folder is not.
      const files = cell.filter((entry) => entry.endsWith('.ts'));
      const targets = [...others.map((other) => `${other}/probe.ts`), ...files];
      const expected = [...others.filter((other) => cell.includes(`${other}/`)).map((other) => `${other}/probe.ts`), ...files];
      expect(await allowedBy(folder, targets), folder).toEqual(expected);
    }
  });
});
