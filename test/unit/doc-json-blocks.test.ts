// The JSON blocks of README.md and docs/ are configs a user copies: each must parse, and a dataset
// config or a node config must be valid for the current schema.
import { resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import { validateDatasetConfig } from '../../src/core/dataset-config.js';
import { parseNodeConfig } from '../../src/node/node-config.js';
import { docJsonBlocks, jsonBlocksOf } from '../support/doc-blocks.js';

const blocks = docJsonBlocks(resolve(import.meta.dirname, '../..'));

describe("the docs' JSON blocks", () => {
  it('finds the blocks, and only the JSON ones', () => {
    expect(blocks.length).toBeGreaterThan(0);
    const md = ['```sh', 'npm test', '```', '```json', '{ "a": 1 }', '```', '```', '```json not a fence of its own', '```'].join('\n');
    expect(jsonBlocksOf('x.md', md).map((b) => [b.line, b.code])).toEqual([[4, '{ "a": 1 }\n']]);
  });

  for (const b of blocks) {
    it(`${b.file}:${b.line} parses, and is valid for its schema`, () => {
      const value = JSON.parse(b.code) as Record<string, unknown>;
      if ('node' in value && 'cluster' in value) {
        expect(() => parseNodeConfig(value, `${b.file}:${b.line}`)).not.toThrow();
      } else if ('ref' in value && 'numShards' in value) {
        const r = validateDatasetConfig(value);
        expect(r.ok ? 'valid' : r.error.message).toBe('valid');
      }
    });
  }
});
