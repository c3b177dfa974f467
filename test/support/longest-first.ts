// The order vitest hands test files to its workers: the simulator's file first (the longest, four
// minutes on worker threads of its own), then the integration files (real services, mostly
// waiting), the live files, and the many short unit files last, which fill the workers the long
// files leave free. vitest's own order runs the projects of a group by name (integration, live,
// sim, unit), so the simulator started when the integration files were all handed out and ended
// the run alone. Within a project, and across groups, vitest's own order stands.
import { BaseSequencer, type TestSpecification } from 'vitest/node';

const PROJECTS_FIRST = ['sim', 'integration', 'live', 'unit'];

function rank(spec: TestSpecification): number {
  const i = PROJECTS_FIRST.indexOf(spec.project.name);
  return i < 0 ? PROJECTS_FIRST.length : i;
}

export default class LongestFirst extends BaseSequencer {
  override async sort(files: TestSpecification[]): Promise<TestSpecification[]> {
    const sorted = await super.sort(files);
    const at = new Map(sorted.map((spec, i) => [spec, i]));
    const group = (spec: TestSpecification) => spec.project.config.sequence.groupOrder;
    return [...sorted].sort((a, b) => group(a) - group(b) || rank(a) - rank(b) || at.get(a)! - at.get(b)!);
  }
}
