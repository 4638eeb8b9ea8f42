/**
 * What a smoke run (`npm run bench -- --smoke`, the form CI runs) must show to pass: every scenario it was asked
 * for produced its section, and every row of a table with an `errors` column answered without one. No timing is
 * judged: the numbers of tiny counts on a busy CI machine mean nothing, only that the bench still works.
 */
import type { ScenarioSection } from './section.ts';

/** A scenario that produced no section, and why. */
export interface MissingScenario {
  /** The scenario's number, e.g. '5'. */
  readonly id: string;
  readonly title: string;
  readonly reason: string;
}

/** The problems found in a run's sections; empty when the run passes. */
export function findSmokeProblems(requested: readonly string[], sections: readonly ScenarioSection[], missing: readonly MissingScenario[]): string[] {
  const problems = missing.map((scenario) => `${scenario.title}: ${scenario.reason}`);
  const produced = new Set(sections.map((section) => section.title.split('.')[0]));
  for (const id of requested) {
    if (!produced.has(id) && !missing.some((scenario) => scenario.id === id)) {
      problems.push(`scenario ${id}: no section was written`);
    }
  }
  for (const section of sections) {
    const errorsColumn = section.table.columns.indexOf('errors');
    if (errorsColumn === -1) continue;
    for (const row of section.table.rows) {
      const errors = row[errorsColumn];
      if (errors !== 0 && errors !== '0') {
        problems.push(`${section.title}: ${String(row[0])} had ${String(errors)} error(s)`);
      }
    }
  }
  return problems;
}
