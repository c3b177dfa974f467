// Tests on simulated time are the machine's background work: their time is the cluster's, so a slow
// machine only makes them take longer, while the tests on the wall clock beside them (real sockets,
// child processes, clusters whose sessions run on real time) fail when starved of CPU. Run as a
// vitest setup file, this lowers the priority of the test's process (vitest starts one per file),
// and every worker thread it starts afterwards inherits it (the simulator's seeds).
import { constants, getPriority, setPriority } from 'node:os';

const BACKGROUND = constants.priority.PRIORITY_BELOW_NORMAL;
if (getPriority() < BACKGROUND) setPriority(BACKGROUND);
