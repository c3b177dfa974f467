// A `shardherd node` process lets cassandra-driver's control-connection race pass (logged), and ends
// on every other unhandled rejection, as Node does by default.
import { pino, type Logger } from 'pino';
import { describe, expect, it } from 'vitest';
import { isCassandraControlConnectionRace, onUnhandledRejection } from '../../src/cli/driver-faults.js';

/** The error a node process died of, with the stack it had (cassandra-driver 4.10.0). */
function driverRace(): TypeError {
  const e = new TypeError("Cannot read properties of null (reading 'once')");
  e.stack = [
    "TypeError: Cannot read properties of null (reading 'once')",
    '    at ControlConnection._setHealthListeners (/srv/app/node_modules/cassandra-driver/lib/control-connection.js:259:10)',
    '    at ControlConnection._refresh (/srv/app/node_modules/cassandra-driver/lib/control-connection.js:506:10)',
    '    at process.processTicksAndRejections (node:internal/process/task_queues:104:5)',
  ].join('\n');
  return e;
}

function logged(): { log: Logger; lines: string[] } {
  const lines: string[] = [];
  return { log: pino({ level: 'warn' }, { write: (line: string) => void lines.push(line) }), lines };
}

describe('unhandled rejections in a node process', () => {
  it("logs cassandra-driver's control-connection race and goes on", () => {
    const { log, lines } = logged();
    expect(() => onUnhandledRejection(driverRace(), log)).not.toThrow();
    expect(lines).toHaveLength(1);
    expect(lines[0]).toContain('"event":"metastore.driver-race"');
  });

  it('ends the process on anything else: the same error elsewhere, another error in the driver, a non-error', () => {
    const { log, lines } = logged();
    const elsewhere = new TypeError("Cannot read properties of null (reading 'once')");
    elsewhere.stack = `${elsewhere.message}\n    at Object.setHealth (/srv/app/src/health.js:1:1)`;
    const otherDriverError = driverRace();
    otherDriverError.stack = otherDriverError.stack!.replace('_setHealthListeners', '_borrowAConnection');
    const notATypeError = Object.assign(new Error('socket closed'), { stack: driverRace().stack });
    for (const reason of [elsewhere, otherDriverError, notATypeError, 'a string']) expect(() => onUnhandledRejection(reason, log)).toThrow();
    expect(lines).toEqual([]);
    expect(isCassandraControlConnectionRace(undefined)).toBe(false);
  });
});
