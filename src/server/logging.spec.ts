import { describe, expect, it } from 'vitest';
import { contextLog, createRootLogger, prettyTarget } from './logging.js';

describe('prettyTarget', () => {
  it('is pino-pretty only on a terminal where it is installed; JSON otherwise', () => {
    expect(prettyTarget(true, () => true)).toBe('pino-pretty');
    expect(prettyTarget(true, () => false)).toBeUndefined();
    expect(prettyTarget(false, () => true)).toBeUndefined();
  });
});

describe('createRootLogger', () => {
  it('writes one JSON object a line at LOG_LEVEL, boot lines with their context', () => {
    const lines: string[] = [];
    const logger = createRootLogger({ LOG_LEVEL: 'warn' }, { write: (line: string) => void lines.push(line) });
    logger.info('below the level');
    contextLog(logger, 'Tls').warn('serving a generated self-signed certificate');
    expect(lines).toHaveLength(1);
    expect(JSON.parse(lines[0]!)).toMatchObject({ level: 40, context: 'Tls', msg: 'serving a generated self-signed certificate' });
  });
});
