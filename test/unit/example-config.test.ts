// The example configuration users copy from must stay valid as the schema evolves.
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { validateDatasetConfig } from '../../src/core/dataset-config.js';

describe('config/datasets.example.json', () => {
  const file = JSON.parse(readFileSync(new URL('../../config/datasets.example.json', import.meta.url), 'utf8')) as { datasets: unknown[] };

  it('holds only valid dataset configs, with the defaults a reader expects', () => {
    const configs = file.datasets.map((d) => validateDatasetConfig(d));
    expect(configs.map((r) => r.ok && r.value.ref)).toEqual(['metrics', 'logs']);
    const logs = configs[1]!;
    expect(logs.ok && logs.value.spread).toBe(1);
  });
});
