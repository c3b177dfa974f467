// The core's long decisions are generators (`Steps`, src/core/steps.ts): a call that drops one, as
// a statement without `yield*`, runs nothing at all, and the compiler says nothing of it. A round
// silently not run would leave copies unplaced. This test type-checks src/core and refuses any
// statement whose value is a generator left unread; it shows first that it catches one.
import { fileURLToPath } from 'node:url';
import { readdirSync } from 'node:fs';
import { join, relative } from 'node:path';
import ts from 'typescript';
import { describe, expect, it } from 'vitest';

const repoRoot = fileURLToPath(new URL('../..', import.meta.url));
const OPTIONS: ts.CompilerOptions = {
  strict: true,
  target: ts.ScriptTarget.ES2022,
  module: ts.ModuleKind.NodeNext,
  moduleResolution: ts.ModuleResolutionKind.NodeNext,
  noEmit: true,
  skipLibCheck: true,
};

function tsFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) =>
    e.isDirectory() ? tsFiles(join(dir, e.name)) : e.name.endsWith('.ts') ? [join(dir, e.name)] : [],
  );
}

/** Statements of `files` (in `program`) that call something returning a generator and drop it. */
function droppedSteps(program: ts.Program, files: readonly string[]): string[] {
  const checker = program.getTypeChecker();
  const found: string[] = [];
  for (const file of files) {
    const source = program.getSourceFile(file)!;
    const visit = (node: ts.Node): void => {
      if (ts.isExpressionStatement(node)) {
        let e: ts.Expression = node.expression;
        // `a && gen()` and `cond ? gen() : x` drop it too.
        while (ts.isBinaryExpression(e) || ts.isConditionalExpression(e) || ts.isParenthesizedExpression(e))
          e = ts.isBinaryExpression(e) ? e.right : ts.isConditionalExpression(e) ? e.whenTrue : e.expression;
        if (ts.isCallExpression(e) && checker.getTypeAtLocation(e).getSymbol()?.getName() === 'Generator') {
          const { line } = source.getLineAndCharacterOfPosition(node.getStart());
          found.push(`${relative(repoRoot, file)}:${line + 1}: ${node.getText().slice(0, 80)}`);
        }
      }
      ts.forEachChild(node, visit);
    };
    visit(source);
  }
  return found;
}

describe('a decision in steps', { timeout: 60_000 }, () => {
  it('is never dropped by a call without yield* (the check itself catches one)', () => {
    const probe = join(repoRoot, 'src/core/__steps_probe__.ts');
    const text =
      "import type { Steps } from './steps.js';\nfunction* round(): Steps<number> { yield; return 1; }\nexport function* decide(): Steps<void> { round(); yield* round(); }\n";
    const host = ts.createCompilerHost(OPTIONS);
    const read = host.readFile.bind(host);
    host.readFile = (f) => (f === probe ? text : read(f));
    const exists = host.fileExists.bind(host);
    host.fileExists = (f) => f === probe || exists(f);
    const getSource = host.getSourceFile.bind(host);
    host.getSourceFile = (f, v, ...rest) => (f === probe ? ts.createSourceFile(f, text, v) : getSource(f, v, ...rest));
    const probed = droppedSteps(ts.createProgram([probe], OPTIONS, host), [probe]);
    expect(probed).toEqual(['src/core/__steps_probe__.ts:3: round();']);

    const core = tsFiles(join(repoRoot, 'src/core'));
    expect(droppedSteps(ts.createProgram(core, OPTIONS), core)).toEqual([]);
  });
});
