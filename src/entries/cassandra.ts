/** `shardherd/cassandra`: the Cassandra MetaStore of a real deployment. Loads cassandra-driver. */
export type { CassandraMetaStoreOptions, KeyspaceReplication } from '../store/cassandra-meta-store.js';
export { CassandraMetaStore, MetaStoreRowError } from '../store/cassandra-meta-store.js';
