// The errors of the Kafka membership: why `join` rejected, with a stable code.
export type KafkaMembershipErrorCode =
  /** No view with this member within `joinTimeoutMs` (unreachable broker, say). Retriable with a new handle. */
  | 'JOIN_TIMEOUT'
  /** The consumer gave up while joining (kafkajs will not restart it). */
  | 'JOIN_FAILED'
  /** The handle fenced itself while joining. */
  | 'FENCED'
  /** `leave`/`close` came first, or `join` was called twice: a handle joins once. */
  | 'CLOSED';

/** Why `join` rejected, with the node it was for and the kafkajs error behind it as `cause`. */
export class KafkaMembershipError extends Error {
  readonly code: KafkaMembershipErrorCode;
  readonly retriable: boolean;
  readonly node: string | undefined;

  constructor(
    code: KafkaMembershipErrorCode,
    message: string,
    context: { readonly node?: string; readonly cause?: unknown; readonly retriable?: boolean } = {},
  ) {
    super(message, context.cause === undefined ? undefined : { cause: context.cause });
    this.name = 'KafkaMembershipError';
    this.code = code;
    this.retriable = context.retriable ?? false;
    this.node = context.node;
  }
}
