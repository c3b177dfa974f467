// The bearer token that guards every mutating route. From the node's config, else from the
// SHARDHERD_TOKEN environment variable, else made at start and written to a file only the node's
// user can read, where the CLI on the same machine finds it (as Jupyter does with its token).
import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import { chmodSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { dirname, join } from 'node:path';

export const TOKEN_ENV = 'SHARDHERD_TOKEN';
/** Overrides the folder of generated token files (default `~/.shardherd`). */
export const TOKEN_DIR_ENV = 'SHARDHERD_TOKEN_DIR';

export interface AccessToken {
  readonly token: string;
  /** Where it came from, for the log line that says so (never the token itself). */
  readonly origin: 'config' | 'environment' | 'generated';
  /** The file a generated token was written to. */
  readonly file?: string;
}

/** The folder generated tokens go to. */
export function tokenDir(env: NodeJS.ProcessEnv = process.env): string {
  return env[TOKEN_DIR_ENV] || join(homedir(), '.shardherd');
}

/** The token file of the node listening on `port` (one file per port, so several local nodes do not overwrite each other). */
export function tokenFile(port: number, env: NodeJS.ProcessEnv = process.env): string {
  return join(tokenDir(env), `token-${port}`);
}

/**
 * Resolves the token: `configured`, else the environment's, else a new random one written to
 * `tokenFile(port)` with mode 0600 (its folder 0700).
 */
export function resolveAccessToken(configured: string | undefined, port: number, env: NodeJS.ProcessEnv = process.env): AccessToken {
  if (configured) return { token: configured, origin: 'config' };
  const fromEnv = env[TOKEN_ENV];
  if (fromEnv) return { token: fromEnv, origin: 'environment' };
  const token = randomBytes(24).toString('base64url');
  const file = tokenFile(port, env);
  mkdirSync(dirname(file), { recursive: true, mode: 0o700 });
  writeFileSync(file, `${token}\n`, { mode: 0o600 });
  chmodSync(file, 0o600); // an existing file keeps its old mode through writeFileSync
  return { token, origin: 'generated', file };
}

/**
 * Removes the file a generated token was written to, when the node that wrote it stops cleanly: a
 * file left behind would hand the CLI a dead node's token. A file that holds another token by now
 * (a newer node on the same port wrote it) is left alone.
 */
export function removeTokenFile(token: AccessToken): void {
  if (token.origin !== 'generated' || !token.file) return;
  try {
    if (readFileSync(token.file, 'utf8').trim() === token.token) rmSync(token.file, { force: true });
  } catch {
    // already gone
  }
}

/** The token a local node wrote for `port`, if any. */
export function readTokenFile(port: number, env: NodeJS.ProcessEnv = process.env): string | undefined {
  try {
    return readFileSync(tokenFile(port, env), 'utf8').trim() || undefined;
  } catch {
    return undefined;
  }
}

/**
 * Whether an `Authorization` header carries `expected` as a bearer token. Both sides are hashed
 * first, so the comparison takes the same time whatever the length or content of the guess.
 */
export function bearerMatches(header: string | undefined, expected: string): boolean {
  const m = /^Bearer\s+(\S+)\s*$/i.exec(header ?? '');
  const digest = (s: string) => createHash('sha256').update(s).digest();
  return timingSafeEqual(digest(m?.[1] ?? ''), digest(expected)) && m !== null;
}
