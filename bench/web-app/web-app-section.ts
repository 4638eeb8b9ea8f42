/**
 * Turns the web app benchmark's timings into its report section: each view's median time on screen per store, the
 * slowest request it made, and target 11's goals (views on the large store, and the streamed text's delay).
 */
import type { ScenarioSection, TargetResult } from '../lib/section.ts';
import { formatNumber, median, percentile } from '../lib/statistics.ts';
import type { ViewTiming } from './page-timings.ts';
import type { ProjectConversationsPlan } from './seed-project-conversations.ts';

/** Sizes of a run. */
export interface WebAppRunSize {
  readonly large: ProjectConversationsPlan;
  readonly small: ProjectConversationsPlan;
  readonly repetitions: number;
  readonly streamedWords: number;
  readonly wordsPerSecond: number;
}

/** What was measured on one store. */
export interface StoreViews {
  readonly label: 'small' | 'large';
  readonly plan: ProjectConversationsPlan;
  readonly resources: Readonly<Record<string, number>>;
  /** Timings per view, one per repetition. */
  readonly views: Readonly<Record<string, readonly ViewTiming[]>>;
  /** The streamed reply (large store only): each chunk's delay until shown, ms. */
  readonly stream?: { readonly delays: readonly number[]; readonly unseen: number; readonly chunks: number };
  readonly note: string;
}

/** A view is responsive when its content is on screen within this, on the large store (median). */
const VIEW_TARGET_MS = 1000;
/** One frame at 60 Hz: a chunk shown within it reaches the next paint. */
const FRAME_MS = 1000 / 60;

/** The section "11. Web app". */
export function buildWebAppSection(size: WebAppRunSize, stores: readonly StoreViews[], smoke: boolean): ScenarioSection {
  const count = (value: number): string => value.toLocaleString('en-US');
  const small = stores.find((store) => store.label === 'small');
  const large = stores.find((store) => store.label === 'large');
  const viewNames = Object.keys(large?.views ?? small?.views ?? {});
  const medianMs = (store: StoreViews | undefined, view: string): number => median((store?.views[view] ?? []).map((timing) => timing.ms));
  const slowest = (store: StoreViews | undefined, view: string): number => Math.max(0, ...(store?.views[view] ?? []).map((timing) => timing.slowestRequestMs));
  const requests = (store: StoreViews | undefined, view: string): number => Math.max(0, ...(store?.views[view] ?? []).map((timing) => timing.requests));
  const rows = viewNames.map((view) => [
    view,
    round(medianMs(small, view)),
    round(medianMs(large, view)),
    round(slowest(large, view)),
    requests(large, view),
  ]);
  const targets: TargetResult[] = viewNames.map((view) => ({
    description: `${view}, ${count(large?.plan.conversations ?? 0)} conversations in the project: median until on screen`,
    measured: `${formatNumber(medianMs(large, view), 0)} ms`,
    reference: `${formatNumber(medianMs(small, view), 0)} ms with ${count(small?.plan.conversations ?? 0)}`,
    target: `≤ ${VIEW_TARGET_MS} ms`,
    met: medianMs(large, view) <= VIEW_TARGET_MS,
  }));
  const stream = large?.stream;
  if (stream) {
    const p99 = percentile([...stream.delays], 99);
    targets.push({
      description: `a streamed reply's text on screen after its chunk arrived (${stream.chunks} chunks): p99 delay`,
      measured: `${formatNumber(p99)} ms (median ${formatNumber(median([...stream.delays]))} ms, max ${formatNumber(Math.max(0, ...stream.delays))} ms${stream.unseen ? `, ${stream.unseen} never shown` : ''})`,
      target: `≤ ${formatNumber(FRAME_MS, 1)} ms (one frame at 60 Hz)`,
      met: stream.unseen === 0 && p99 <= FRAME_MS,
    });
  }
  return {
    title: '11. Web app',
    method:
      `The web app (the built app, served by the standalone host at /fhirgate/app/) in Debian's Chromium driven by playwright-core, ` +
      `Dr. Carter and Rosa Reyes signed in through the app's sign-in form, each in a browser context of her own. Two stores of the demo ` +
      `project: "small" (${count(small?.plan.conversations ?? 0)} conversations) and "large" (${count(large?.plan.conversations ?? 0)} ` +
      `conversations of Dr. Carter and ${count(large?.plan.practitioners ?? 0)} colleagues, 1 to 8 turns each, a tenth Dr. Carter's, two ` +
      `thirds about a patient with the disclosure AuditEvent of every such reply). One host at a time. Each view ${size.repetitions} ` +
      `time${size.repetitions === 1 ? '' : 's'}: a navigation is timed from the navigation's start, a click from just before it, until the ` +
      `view shows its content, on the page's own clock (performance.now(), polled every animation frame); "slowest request" is the longest ` +
      `FHIR or /v1 request the view made (Resource Timing, request start to last byte), "requests" how many it made. The streamed reply: ` +
      `${size.streamedWords} words at ${size.wordsPerSecond} a second from the emulator; each chunk is timestamped as the page's fetch hands ` +
      `it over and each change of the conversation on screen by a MutationObserver; a chunk's delay is until the conversation shows its text.` +
      `${smoke ? ' SMOKE RUN: tiny stores, numbers not meaningful.' : ''}`,
    table: {
      columns: ['view', 'small store: median ms', 'large store: median ms', 'large: slowest request ms', 'large: requests'],
      rows,
    },
    targets,
    chart: { title: 'Web app: median until on screen, large store (ms)', bars: viewNames.map((view) => ({ label: view, value: round(medianMs(large, view)), unit: 'ms' })) },
    notes: stores.map((store) => store.note),
  };
}

function round(value: number): number {
  return Math.round(value * 10) / 10;
}
