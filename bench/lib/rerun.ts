/**
 * A scenario run again into an earlier full run (`npm run bench -- --rerun 11`): the earlier run's sections
 * (raw/sections.json) with the scenarios run again put in their place, the rest kept as they were measured, and the
 * report saying which scenarios were run when. For a scenario that failed in a long run (a browser step, say),
 * without measuring everything again.
 */
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { ScenarioSection } from './section.ts';
import type { MissingScenario } from './smoke-check.ts';
import type { OtherProcessesCpu } from '../report/other-processes.ts';

/** What a run keeps beside its report (raw/run.json), so a later rerun can render it again. */
export interface RunRecord {
  readonly startedAt: string;
  readonly durationSeconds: number;
  readonly stolenPercent?: number;
  /** The CPU processes outside the bench used during the run (bench/report/other-processes.ts). */
  readonly otherProcesses?: OtherProcessesCpu;
  readonly missing: readonly MissingScenario[];
  /** Scenarios run again later, with when. */
  readonly reruns?: readonly Rerun[];
}

export interface Rerun {
  readonly ids: readonly string[];
  readonly at: string;
  readonly durationSeconds: number;
  readonly otherProcesses?: OtherProcessesCpu;
}

/** The scenario id a section belongs to: the number its title starts with (`11. Web app` → `11`). */
export function scenarioIdOf(section: Pick<ScenarioSection, 'title'>): string {
  return section.title.split('.')[0].trim();
}

/** The earlier run in `rawDirectory`: its sections and its record (read from the report's first line when it has no run.json). */
export function readEarlierRun(rawDirectory: string, reportFile: string): { sections: ScenarioSection[]; record: RunRecord } {
  const sectionsFile = join(rawDirectory, 'sections.json');
  if (!existsSync(sectionsFile)) {
    throw new Error(`--rerun needs an earlier run's ${sectionsFile}: run the full bench first.`);
  }
  const sections = JSON.parse(readFileSync(sectionsFile, 'utf8')) as ScenarioSection[];
  const recordFile = join(rawDirectory, 'run.json');
  if (existsSync(recordFile)) {
    return { sections, record: JSON.parse(readFileSync(recordFile, 'utf8')) as RunRecord };
  }
  return { sections, record: recordFromReport(existsSync(reportFile) ? readFileSync(reportFile, 'utf8') : '') };
}

/** A run record read back from a report written before runs kept one: its start, length and missing scenarios. */
export function recordFromReport(report: string): RunRecord {
  const header = /^Run (\S+), (\d+) s\./m.exec(report);
  const stolen = /^\| CPU time stolen by the hypervisor during the run \| ([\d.]+) % \|$/m.exec(report);
  const missing: MissingScenario[] = [];
  for (const match of report.matchAll(/^## ((\d+)\. [^\n]*)\n\nNot measured in this run: ([^\n]*)$/gm)) {
    missing.push({ id: match[2], title: match[1], reason: match[3] });
  }
  return {
    startedAt: header?.[1] ?? 'unknown',
    durationSeconds: header ? Number(header[2]) : 0,
    stolenPercent: stolen ? Number(stolen[1]) : undefined,
    missing,
  };
}

/**
 * The earlier run's sections with each of `ids` replaced by its new section (in the same place; a scenario new to
 * the run goes last), and its missing scenarios without those run again, plus any that failed again.
 */
export function mergeRerun(
  earlier: { readonly sections: readonly ScenarioSection[]; readonly record: RunRecord },
  ids: readonly string[],
  rerun: {
    readonly sections: readonly ScenarioSection[];
    readonly missing: readonly MissingScenario[];
    readonly at: string;
    readonly durationSeconds: number;
    readonly otherProcesses?: OtherProcessesCpu;
  }
): { sections: ScenarioSection[]; record: RunRecord } {
  const fresh = new Map(rerun.sections.map((section) => [scenarioIdOf(section), section]));
  const sections = earlier.sections.flatMap((section) => {
    const id = scenarioIdOf(section);
    if (!ids.includes(id)) return [section];
    const replacement = fresh.get(id);
    fresh.delete(id);
    return replacement ? [replacement] : [];
  });
  sections.push(...fresh.values());
  const missing = [...earlier.record.missing.filter((scenario) => !ids.includes(scenario.id)), ...rerun.missing];
  return {
    sections,
    record: {
      ...earlier.record,
      missing,
      // An earlier rerun of only these scenarios no longer gives any section: this one says when they were run.
      reruns: [...(earlier.record.reruns ?? []).filter((before) => !before.ids.every((id) => ids.includes(id))), { ids, at: rerun.at, durationSeconds: rerun.durationSeconds, otherProcesses: rerun.otherProcesses }],
    },
  };
}
