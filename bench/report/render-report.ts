/** The markdown report: machine facts, the process layout, then each scenario's method, table, targets and notes. */
import type { ScenarioSection, TargetResult } from '../lib/section.ts';
import type { MachineFacts } from './machine-facts.ts';
import type { Rerun } from '../lib/rerun.ts';
import type { OtherProcessesCpu } from './other-processes.ts';

export interface ReportInput {
  /** When the run started (ISO 8601). */
  readonly startedAt: string;
  readonly durationSeconds: number;
  /** Scenarios run again into this run later (`--rerun`): their sections are from then. */
  readonly reruns?: readonly Rerun[];
  readonly smoke: boolean;
  readonly machine: MachineFacts;
  /**
   * The share of the machine's CPU time the hypervisor gave to other guests during the run (/proc/stat's steal): a
   * busy host slows every contender, so runs compare only when it is alike. Undefined where it cannot be read.
   */
  readonly stolenPercent?: number;
  /** The CPU that processes outside the bench used during the run; undefined where /proc cannot be read. */
  readonly otherProcesses?: OtherProcessesCpu;
  readonly layout: string;
  /** The Node flags the fhirgate hosts ran with: their own commands' (main.ts's `#!` line), then any extra. */
  readonly fhirgateNodeFlags: readonly string[];
  /** The Node flags the floor (SDK relay + store) ran with: the standalone host's own, so it keeps fhirgate's memory bounds. */
  readonly floorNodeFlags?: readonly string[];
  /** How the fhirgate host differs from `npm start`. */
  readonly fhirgateHost?: string;
  readonly sections: readonly ScenarioSection[];
  /** Scenarios that did not produce a section, with the reason. */
  readonly missing: readonly { readonly title: string; readonly reason: string }[];
  readonly chartFile?: string;
  /** Hand-written markdown appended as is (bench/findings.md: profiles and before/after of fixes). */
  readonly appendix?: string;
}

/**
 * Above this share of the machine's cores used by processes outside the bench, over the run or its busiest 10 s, the
 * report says the run was not quiet: the contenders' figures are then lower than the machine gives, not alike.
 */
export const QUIET_RUN_PERCENT = 5;

/** The cell of the CPU that other processes used: the run's share, the core-seconds and the busiest 10 s. */
export function otherProcessesCell(others: OtherProcessesCpu | undefined): string {
  if (!others) return 'not measured';
  return `${others.outsidePercent.toFixed(1)} % of the cores (${others.outsideSeconds.toFixed(0)} core-seconds; the busiest 10 s: ${others.peakWindowPercent.toFixed(0)} %)`;
}

/** Whether other processes used enough of the machine during a run (or a rerun) that its figures do not compare. */
export function wasNotQuiet(others: OtherProcessesCpu | undefined): boolean {
  return others !== undefined && (others.outsidePercent > QUIET_RUN_PERCENT || others.peakWindowPercent > 4 * QUIET_RUN_PERCENT);
}

/** A list of Node flags as a cell: each as code, or `none`. */
function flagsCell(flags: readonly string[]): string {
  return cell(flags.length > 0 ? flags.map((flag) => `\`${flag}\``).join(' ') : 'none');
}

function cell(value: string | number): string {
  return String(value).replace(/\|/g, '\\|').replace(/\n/g, ' ');
}

/** The floor's cell: its figure, and whether it meets the goal or by how much it falls short. */
function floorCell(target: TargetResult): string {
  if (!target.floor) return '—';
  return cell(`${target.floor.measured}: ${target.floor.met ? 'meets it' : `short by ${target.floor.shortBy ?? '?'}`}`);
}

/** One table of targets: fhirgate's figure, the SDK relay's of the same run, the goal, the verdict, the floor. */
function renderTargets(targets: readonly TargetResult[], prefix: (target: TargetResult) => string = () => ''): string[] {
  const lines = [
    '| target | fhirgate | SDK relay (or the floor, where the goal is stated at it), same run | goal | result | floor: SDK relay + store, same goal |',
    '|---|---|---|---|---|---|',
  ];
  for (const target of targets) {
    lines.push(
      `| ${cell(prefix(target) + target.description)} | ${cell(target.measured)} | ${cell(target.reference ?? '—')} | ${cell(target.target)} | ${target.met ? 'met' : '**missed**'} | ${floorCell(target)} |`,
    );
  }
  return [...lines, ''];
}

/** One scenario's section: its method, tables, targets and notes (also used to add a scenario run alone to a report). */
export function renderSection(section: ScenarioSection): string[] {
  const lines = [`## ${section.title}`, '', section.method, ''];
  lines.push(`| ${section.table.columns.map(cell).join(' | ')} |`, `|${section.table.columns.map(() => '---').join('|')}|`);
  for (const row of section.table.rows) lines.push(`| ${row.map(cell).join(' | ')} |`);
  lines.push('');
  for (const table of section.tables ?? []) {
    lines.push(table.title, '', `| ${table.columns.map(cell).join(' | ')} |`, `|${table.columns.map(() => '---').join('|')}|`);
    for (const row of table.rows) lines.push(`| ${row.map(cell).join(' | ')} |`);
    lines.push('');
  }
  if (section.targets.length > 0) lines.push(...renderTargets(section.targets));
  for (const note of section.notes) lines.push(`- ${note}`);
  if (section.notes.length > 0) lines.push('');
  return lines;
}

/** Every target of the run in one table, each with its scenario's number. */
function renderTargetSummary(sections: readonly ScenarioSection[]): string[] {
  const scenarioOf = new Map<TargetResult, string>();
  for (const section of sections) for (const target of section.targets) scenarioOf.set(target, section.title.split('.')[0]);
  const targets = sections.flatMap((section) => section.targets);
  if (targets.length === 0) return [];
  return [
    '## Targets',
    '',
    'Each goal is stated against the SDK relay of this run (the official `openai` SDK with nothing authenticated, checked or stored). ' +
      'The floor is the SDK relay plus what the store must do for every continued turn, as the standalone host does it: the conversation\'s history page read and sent, and the two records every turn stores written durably. A goal it misses is out of reach for any gateway that sends the history and keeps those records on this machine, by the amount shown. ' +
      'The goals marked "at its floor" are stated against the floor itself (fhirgate beside a gateway that does only what the store must). ' +
      'Section 14 shows, in the same run, what each part of a turn costs the relay, the floor and fhirgate: what a missed goal would take away.',
    '',
    ...renderTargets(targets, (target) => `${scenarioOf.get(target) ?? '?'}. `),
  ];
}

export function renderReport(input: ReportInput): string {
  const { machine } = input;
  const targets = input.sections.flatMap((section) => section.targets);
  const lines = [
    `# fhirgate benchmark${input.smoke ? ' (smoke run: tiny counts, numbers not meaningful)' : ''}`,
    '',
    `Run ${input.startedAt}, ${Math.round(input.durationSeconds)} s. Generated by \`npm run bench\` (bench/README.md).`,
    '',
    ...(input.reruns ?? []).map(
      (rerun) =>
        `Scenario${rerun.ids.length > 1 ? 's' : ''} ${rerun.ids.join(', ')} run again ${rerun.at}, ${Math.round(rerun.durationSeconds)} s (\`npm run bench -- --rerun ${rerun.ids.join(',')}\`): ${rerun.ids.length > 1 ? 'their sections are' : 'its section is'} from then, the rest from the run above.`
    ),
    ...((input.reruns ?? []).length > 0 ? [''] : []),
    '| machine | |',
    '|---|---|',
    `| CPU | ${cell(machine.cpuModel)} |`,
    `| cores | ${machine.cores} |`,
    `| memory | ${machine.memoryGigabytes} GB |`,
    `| OS | ${cell(machine.operatingSystem)} |`,
    `| Node | ${machine.nodeVersion} |`,
    `| Portkey gateway | ${machine.portkeyVersion} |`,
    `| CPU time stolen by the hypervisor during the run | ${input.stolenPercent === undefined ? 'not measured' : `${input.stolenPercent.toFixed(1)} %`} |`,
    `| CPU used by other processes on the machine during the run | ${cell(otherProcessesCell(input.otherProcesses))} |`,
    ...(input.reruns ?? []).map((rerun) => `| the same, during the rerun of ${rerun.ids.join(', ')} | ${cell(otherProcessesCell(rerun.otherProcesses))} |`),
    `| process layout | ${cell(input.layout)} |`,
    `| fhirgate's Node flags | ${flagsCell(input.fhirgateNodeFlags)} |`,
    ...(input.floorNodeFlags ? [`| the floor's (SDK relay + store) Node flags | ${flagsCell(input.floorNodeFlags)} |`] : []),
    ...(input.fhirgateHost ? [`| fhirgate's host | ${cell(input.fhirgateHost)} |`] : []),
    '',
    ...(wasNotQuiet(input.otherProcesses) || (input.reruns ?? []).some((rerun) => wasNotQuiet(rerun.otherProcesses))
      ? [
          `**Not a quiet run.** Processes outside the bench used more than ${QUIET_RUN_PERCENT} % of the cores over the run (or ${4 * QUIET_RUN_PERCENT} % of a 10 s window): they took CPU from the contenders and the load generator, so this run's figures are lower than the machine gives and compare neither with a quiet run's nor, fairly, with each other (such work does not slow the contenders alike). Run the bench again on a quiet machine.`,
          '',
        ]
      : []),
    `Targets met: ${targets.filter((target) => target.met).length} of ${targets.length}.`,
    '',
  ];
  lines.push(...renderTargetSummary(input.sections));
  if (input.chartFile) lines.push(`![chart](${input.chartFile})`, '');
  for (const section of input.sections) lines.push(...renderSection(section));
  for (const missing of input.missing) lines.push(`## ${missing.title}`, '', `Not measured in this run: ${missing.reason}`, '');
  if (input.appendix) lines.push(input.appendix.trim(), '');
  return lines.join('\n');
}
