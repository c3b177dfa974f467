// A setup file of the projects that use kafkajs in the test process: its negative-timeout warning
// (one per broker connection on Node 24) is dropped, as the `shardherd` command drops it, and every
// other warning is printed (src/cli/process-warnings.ts).
import { skipKafkajsNegativeTimeouts } from '../../src/cli/process-warnings.js';

skipKafkajsNegativeTimeouts();
