#!/usr/bin/env node
// The config classes' decorators read design-time metadata: loaded before any of them.
import 'reflect-metadata';
import { runCli } from './plan/plan.cli.js';

process.exitCode = await runCli(
  process.argv.slice(2),
  (text) => process.stdout.write(text),
  (text) => process.stderr.write(text),
);
