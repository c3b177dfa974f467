import type { DatasetConfig, IngestionSourceConfig } from '../core/dataset-config.js';
import type { IngestionSource } from './ingestion-source.js';

export type SourcesByType = { readonly [T in IngestionSourceConfig['type']]?: IngestionSource };

/** One source for a process that serves datasets of several source types: each dataset is read by the source of its type. */
export function sourceByType(sources: SourcesByType): IngestionSource {
  const pick = (dataset: DatasetConfig): IngestionSource => {
    const source = sources[dataset.source.type];
    if (!source) throw new Error(`dataset ${dataset.ref}: this node has no ${dataset.source.type} ingestion source configured`);
    return source;
  };
  return {
    open: async (dataset, shard) => pick(dataset).open(dataset, shard),
    validate: async (dataset) => {
      await pick(dataset).validate?.(dataset);
    },
    createTopic: async (dataset) => {
      const source = pick(dataset);
      if (!source.createTopic) throw new Error(`dataset ${dataset.ref}: its ${dataset.source.type} source has no topic to create`);
      return source.createTopic(dataset);
    },
  };
}
