import type { MetaStore } from '../store/meta-store.js';

/**
 * Who may act as the singleton: a lease with an epoch, taken by compare-and-set, so two candidates
 * can never both win the same epoch and every write of a replaced singleton is refused. It lives in
 * the MetaStore (a Cassandra lightweight transaction in production) because the epoch must fence
 * the MetaStore's own writes; this is the narrow view the singleton's candidates use.
 */
export type SingletonLease = Pick<MetaStore, 'readLease' | 'takeLease' | 'renewLease'>;
