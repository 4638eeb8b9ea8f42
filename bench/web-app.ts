/**
 * Scenario 11, the web app at scale: how long the clinician's and the reviewer's pages take to show what they are
 * for, in a real browser, on a project holding 100,000 conversations (1,000,000 Communications, and the disclosure
 * AuditEvents of every reply about a patient) against the same pages on a project of 100 conversations; and how
 * late a streamed reply's text reaches the screen.
 *
 *   node bench/web-app.ts --out <file.json> [--smoke]
 *
 * Stores are seeded as scenarios 5 and 7 seed theirs (bulk-loaded with the store's own index rows, cached under
 * bench/results/raw/, copied per run). One host at a time, the browser (Debian's Chromium) on the load core.
 */
import { mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { chromium, type Browser, type Page } from 'playwright-core';
import { readDemoPassword, readDemoReviewerPassword } from '../plugin/hosts/standalone/demo-password.ts';
import { ensureWebAppBuilt } from '../test/support/web-app-build.ts';
import { layout, startHost, type RunningHost } from './history/processes.ts';
import { RAW_DIRECTORY, STORE_SOURCES, cachedSeed, copyForRun } from './history/store-cache.ts';
import { startEmulator } from './lib/emulator-process.ts';
import { stopProcess } from './lib/processes.ts';
import { STREAM_PROBE, streamDelays, timeView, untilOnScreen, type ViewTiming } from './web-app/page-timings.ts';
import { seedProjectConversations, type ProjectConversationsPlan } from './web-app/seed-project-conversations.ts';
import { buildWebAppSection, type StoreViews, type WebAppRunSize } from './web-app/web-app-section.ts';

const FULL: WebAppRunSize = {
  large: { conversations: 100_000, practitioners: 200 },
  small: { conversations: 100, practitioners: 10 },
  repetitions: 5,
  streamedWords: 300,
  wordsPerSecond: 50,
};
const SMOKE: WebAppRunSize = {
  large: { conversations: 1_000, practitioners: 20 },
  small: { conversations: 100, practitioners: 10 },
  repetitions: 1,
  streamedWords: 40,
  wordsPerSecond: 40,
};
const SOURCES = [...STORE_SOURCES, 'bench/web-app/seed-project-conversations.ts', 'bench/history/bulk-communications.ts', 'plugin/chat/communication-builders.ts', 'plugin/chat/disclosure-audit.ts'];
const CLINICIAN_EMAIL = 'alice.carter@example.org';
const REVIEWER_EMAIL = 'rosa.reyes@example.org';
const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';

/** The views measured, each a navigation or a click and what shows it is done (run in the page). */
const READY = {
  clinicianList: `document.querySelectorAll('nav[aria-label="Your conversations"] a').length > 1`,
  reviewRows: `document.querySelectorAll('[role="tabpanel"][id$="-panel-conversations"] tbody tr td').length > 0`,
  disclosureRows: `document.querySelectorAll('[role="tabpanel"][id$="-panel-disclosures"] tbody tr td').length > 0`,
  thread: `document.querySelectorAll('[aria-label="Thread"] article').length > 0`,
  /** The first conversation row shows another conversation than `before`. */
  otherFirstRow: (before: string) =>
    `(document.querySelector('[role="tabpanel"][id$="-panel-conversations"] tbody tr')?.textContent ?? ${JSON.stringify(before)}) !== ${JSON.stringify(before)}`,
};

const { values } = parseArgs({ options: { out: { type: 'string' }, smoke: { type: 'boolean', default: false } } });
if (!values.out) {
  throw new Error('usage: node bench/web-app.ts --out <file.json> [--smoke]');
}
const size = values.smoke ? SMOKE : FULL;
mkdirSync(RAW_DIRECTORY, { recursive: true });
await ensureWebAppBuilt();

const emulator = await startEmulator(layout.generatorCore);
const browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox'] });
const measured: StoreViews[] = [];
try {
  for (const label of ['small', 'large'] as const) {
    measured.push(await measureStore(label, size[label]));
  }
} finally {
  await browser.close();
  await emulator.stop();
}
const section = buildWebAppSection(size, measured, Boolean(values.smoke));
writeFileSync(values.out, `${JSON.stringify(section, null, 2)}\n`);
process.stdout.write(`${values.out}: ${section.targets.map((target) => `${target.description}: ${target.measured} ${target.met ? 'met' : 'MISSED'}`).join('; ')}\n`);

async function measureStore(label: 'small' | 'large', plan: ProjectConversationsPlan): Promise<StoreViews> {
  const cached = await cachedSeed(`web-app-store-${values.smoke ? 'smoke' : 'full'}-${label}`, plan, seedProjectConversations, SOURCES);
  const { workDir, copySeconds } = copyForRun(cached.directory, `web-app-work-${label}`);
  let host: RunningHost | undefined;
  try {
    host = await startHost({ dataDir: workDir, emulatorUrl: emulator.url });
    const appUrl = `${host.url}fhirgate/app/`;
    const views: Record<string, ViewTiming[]> = {};
    const record = (view: string, timing: ViewTiming): void => {
      (views[view] ??= []).push(timing);
    };
    const clinician = await signedIn(appUrl, CLINICIAN_EMAIL, readDemoPassword(workDir));
    const reviewer = await signedIn(appUrl, REVIEWER_EMAIL, readDemoReviewerPassword(workDir));
    for (let repetition = 0; repetition < size.repetitions; repetition++) {
      record('clinician: chat page, her conversations listed', await timeView(clinician, () => clinician.goto(`${appUrl}chat`), READY.clinicianList, true));
      record('reviewer: console, the newest conversations listed', await timeView(reviewer, () => reviewer.goto(`${appUrl}review`), READY.reviewRows, true));
      const firstRow = await reviewer.locator('[role="tabpanel"] tbody tr').first().textContent();
      record('reviewer: the next page of conversations', await timeView(reviewer, () => nextPage(reviewer), READY.otherFirstRow(firstRow ?? ''), false));
      record('reviewer: disclosures listed', await timeView(reviewer, () => reviewer.getByRole('tab', { name: 'Disclosures' }).click(), READY.disclosureRows, false));
      await reviewer.goto(`${appUrl}review`);
      await untilOnScreen(reviewer, READY.reviewRows);
      // The row's first cell: a name in the row is a link to the person's record, and the row's middle can be one.
      record('reviewer: a conversation\'s thread', await timeView(reviewer, () => reviewer.locator('[role="tabpanel"] tbody tr').first().locator('td').first().click(), READY.thread, false));
    }
    const stream = label === 'large' ? await measureStream(clinician, appUrl) : undefined;
    await clinician.context().close();
    await reviewer.context().close();
    const total = Object.values(cached.seeded.resources).reduce((sum, count) => sum + count, 0);
    const note =
      `Store "${label}": ${total.toLocaleString('en-US')} resources (${Object.entries(cached.seeded.resources).map(([type, count]) => `${count.toLocaleString('en-US')} ${type}`).join(', ')}; ` +
      `${cached.seeded.clinicianConversations.toLocaleString('en-US')} conversations Dr. Carter's) bulk-loaded with the store's own index rows in ${cached.seeded.seedSeconds.toFixed(1)} s, ` +
      `${cached.seededNow ? 'seeded by this run' : 'reused from bench/results/raw/ (seeded by an earlier run)'}; copied and read into the page cache in ${copySeconds.toFixed(1)} s.`;
    return { label, plan, resources: cached.seeded.resources, views, stream, note };
  } finally {
    if (host) {
      await stopProcess(host.child, 10_000);
    }
    rmSync(workDir, { recursive: true, force: true });
  }
}

/** A page of a browser context of its own, signed in through the app's sign-in form, on the chat page. */
async function signedIn(appUrl: string, email: string, password: string): Promise<Page> {
  const context = await (browser as Browser).newContext({ viewport: { width: 1280, height: 900 } });
  await context.addInitScript(STREAM_PROBE);
  const page = await context.newPage();
  await page.goto(appUrl);
  await page.getByLabel('Email').fill(email);
  await page.getByRole('button', { name: 'Continue' }).click();
  await page.getByRole('textbox', { name: 'Password' }).fill(password);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.getByRole('heading', { name: 'Chat' }).waitFor({ timeout: 120_000 });
  return page;
}

/** The conversations search's next page (SearchControl's pagination). */
async function nextPage(page: Page): Promise<void> {
  await page.locator('[role="tabpanel"]').getByRole('button', { name: /next/i }).first().click();
}

/** One streamed reply on the chat page, every chunk's delay until the conversation shows it. */
async function measureStream(page: Page, appUrl: string): Promise<{ delays: readonly number[]; unseen: number; chunks: number }> {
  const words = Array.from({ length: size.streamedWords }, (_, index) => `word${index + 1}`).join(' ');
  await emulator.setBehaviour({ reply: words, tokensPerSecond: size.wordsPerSecond });
  try {
    await page.goto(`${appUrl}chat`);
    await page.getByRole('textbox', { name: 'Message' }).fill('Stream a long answer, please.');
    await page.getByRole('button', { name: 'Send' }).click();
    await untilOnScreen(page, `(document.querySelector('[role="log"]')?.textContent ?? '').includes('word${size.streamedWords}')`);
    await page.getByRole('button', { name: 'Send' }).waitFor({ state: 'visible' });
    const { delays, unseen } = await streamDelays(page);
    return { delays, unseen, chunks: delays.length + unseen };
  } finally {
    await emulator.setBehaviour({});
  }
}
