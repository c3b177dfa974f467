// Fetches the Kafka and Cassandra jars from Maven Central with `mvn dependency:copy-dependencies`
// on a small generated pom per service, into separate folders of the cache (the two never share a
// classpath: their netty and jackson versions conflict). A complete folder is reused as it is.
import { existsSync } from 'node:fs';
import { mkdir, readdir, readFile, rename, rm, stat, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { lastLines, runLogged } from './logged-command.js';
import { CASSANDRA_ARTIFACTS, DEPENDENCY_PLUGIN, artifactsDir, cacheRoot, kafkaArtifacts, kafkaVersion, libDir, type ServiceArtifacts } from './config.js';

interface Manifest {
  readonly dependencies: ServiceArtifacts['dependencies'];
  readonly jars: ReadonlyArray<{ readonly name: string; readonly size: number }>;
}

const MANIFEST = 'lib.manifest.json';

export interface FetchResult {
  /** The cache folder's name, e.g. `kafka-4.4.0`. */
  readonly name: string;
  readonly lib: string;
  readonly jars: number;
  /** False when the cache was already complete. */
  readonly downloaded: boolean;
  readonly ms: number;
}

export type Log = (line: string) => void;

/**
 * Both services' jars, Kafka in each release of `kafkaVersions` (default: the one
 * `SHARDHERD_KAFKA_VERSION` chooses); skips whatever is already complete in the cache.
 */
export async function fetchAll(log: Log = () => {}, root = cacheRoot(), kafkaVersions: readonly string[] = [kafkaVersion()]): Promise<FetchResult[]> {
  // One after the other: two Maven processes writing the same local repository is asking for trouble.
  const results: FetchResult[] = [];
  for (const version of kafkaVersions) results.push(await fetchService(kafkaArtifacts(version), log, root));
  results.push(await fetchService(CASSANDRA_ARTIFACTS, log, root));
  return results;
}

export async function fetchService(artifacts: ServiceArtifacts, log: Log = () => {}, root = cacheRoot()): Promise<FetchResult> {
  const started = Date.now();
  const dir = artifactsDir(artifacts, root);
  const lib = libDir(artifacts, root);
  const complete = await completeJarCount(artifacts, root);
  if (complete !== undefined) {
    return { name: artifacts.dirName, lib, jars: complete, downloaded: false, ms: Date.now() - started };
  }
  await mkdir(dir, { recursive: true });
  log(`${artifacts.dirName}: resolving ${artifacts.dependencies.map(coordinate).join(', ')} with Maven into ${lib}`);
  const pom = join(dir, 'pom.xml');
  await writeFile(pom, pomFor(artifacts));
  const staging = join(dir, `lib.partial-${process.pid}`);
  await rm(staging, { recursive: true, force: true });
  const logFile = join(dir, 'fetch.log');
  await runMaven(
    ['-B', '--no-transfer-progress', '-f', pom, `${DEPENDENCY_PLUGIN}:copy-dependencies`, '-DincludeScope=runtime', `-DoutputDirectory=${staging}`],
    logFile,
  );
  const names = (await readdir(staging)).filter((n) => n.endsWith('.jar')).sort();
  if (names.length === 0) throw new Error(`${artifacts.dirName}: Maven copied no jar into ${staging}; see ${logFile}`);
  const jars = await Promise.all(names.map(async (name) => ({ name, size: (await stat(join(staging, name))).size })));
  await rm(lib, { recursive: true, force: true });
  await rm(join(dir, MANIFEST), { force: true });
  await rename(staging, lib);
  // The manifest is written last: its presence says the folder is complete.
  const manifest: Manifest = { dependencies: artifacts.dependencies, jars };
  await writeFile(join(dir, MANIFEST), `${JSON.stringify(manifest, null, 2)}\n`);
  const ms = Date.now() - started;
  log(`${artifacts.dirName}: ${jars.length} jars in ${(ms / 1000).toFixed(1)} s`);
  return { name: artifacts.dirName, lib, jars: jars.length, downloaded: true, ms };
}

/** The number of jars when the cached folder is complete for exactly these dependencies, else undefined. */
export async function completeJarCount(artifacts: ServiceArtifacts, root = cacheRoot()): Promise<number | undefined> {
  const dir = artifactsDir(artifacts, root);
  let manifest: Manifest;
  try {
    manifest = JSON.parse(await readFile(join(dir, MANIFEST), 'utf8')) as Manifest;
  } catch {
    return undefined;
  }
  if (JSON.stringify(manifest.dependencies) !== JSON.stringify(artifacts.dependencies)) return undefined;
  const lib = libDir(artifacts, root);
  for (const jar of manifest.jars) {
    const path = join(lib, jar.name);
    if (!existsSync(path) || (await stat(path)).size !== jar.size) return undefined;
  }
  return manifest.jars.length;
}

/** The jar whose file name starts with `prefix` (e.g. `jamm-`), from a complete lib folder. */
export async function findJar(lib: string, prefix: string): Promise<string> {
  const name = (await readdir(lib)).find((n) => n.startsWith(prefix) && n.endsWith('.jar'));
  if (name === undefined) throw new Error(`no ${prefix}*.jar in ${lib}`);
  return join(lib, name);
}

function coordinate(d: ServiceArtifacts['dependencies'][number]): string {
  return `${d.groupId}:${d.artifactId}:${d.version}`;
}

function pomFor(artifacts: ServiceArtifacts): string {
  const deps = artifacts.dependencies
    .map((d) => `    <dependency><groupId>${d.groupId}</groupId><artifactId>${d.artifactId}</artifactId><version>${d.version}</version></dependency>`)
    .join('\n');
  return `<?xml version="1.0" encoding="UTF-8"?>
<!-- Generated by shardherd scripts/services/fetch.ts: the runtime classpath of the ${artifacts.name} test service. -->
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>shardherd.test-services</groupId>
  <artifactId>${artifacts.name}</artifactId>
  <version>0</version>
  <packaging>pom</packaging>
  <dependencies>
${deps}
  </dependencies>
</project>
`;
}

async function runMaven(args: string[], logFile: string): Promise<void> {
  await writeFile(logFile, '');
  const { code, error } = await runLogged('mvn', args, logFile);
  if (error) throw new Error(`cannot run mvn (${error.message}): Maven 3.8+ and Java 17 must be on PATH to fetch the test services`);
  if (code !== 0) throw new Error(`mvn ${args.slice(4, 5).join(' ')} exited with ${String(code)}; last lines of ${logFile}:\n${await lastLines(logFile)}`);
}
