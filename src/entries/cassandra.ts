/** `shardherd/cassandra`: the Cassandra MetaStore of a real deployment, and an example sink that fences by token. Loads cassandra-driver. */
export type { CassandraMetaStoreOptions, KeyspaceReplication } from '../store/cassandra-meta-store.js';
export { CassandraMetaStore, MetaStoreRowError } from '../store/cassandra-meta-store.js';
export type { CassandraRecordSinkOptions, StoredRecord, StoredShard } from '../ingest/cassandra-record-sink.js';
export { CassandraRecordSink } from '../ingest/cassandra-record-sink.js';
