/**
 * MCP clients' disclosures in the review console, in a real browser (Debian's Chromium) against the standalone host
 * and the LLM emulator. The project allows MCP clients patient data; Dr. Carter asks the chat about Maria Lopez, then
 * an agent connected with the MCP SDK's own client finds Maria and reads her record through fhirgate's MCP server.
 * Rosa Reyes, the compliance officer, reads both kinds of disclosure in one list, each saying where the records
 * went (the chat's model and its conversation; the MCP client by its declared name and version, and the tool it
 * called), narrows the list to MCP clients with the keyboard, per patient and per user, and exports them. Dr. Carter
 * on the same console is refused them. The screenshot is the one docs/app.md shows; axe finds no violation.
 */
import { readFile } from 'node:fs/promises';
import type { AuditEvent, Bundle, Project, Resource } from '@medplum/fhirtypes';
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import type { Browser, Locator, Page } from 'playwright-core';
import { MCP_PATIENT_DATA_SETTING } from '../../plugin/mcp/mcp-patient-data.ts';
import { browserTestsRun, launchChromium } from '../support/browser.ts';
import { CHAT_MODEL } from '../support/chat-host.ts';
import { accessibilityViolations, CLINICIAN, REVIEWER, startReviewHost, type ReviewHost } from '../support/review-console.ts';
import { waitFor } from '../support/wait-for.ts';
import { ensureWebAppBuilt } from '../support/web-app-build.ts';
import { DOCS_IMAGES } from '../support/web-journey.ts';

/** The MCP client as it declares itself (clientInfo), and so as the record names it. */
const AGENT = { name: 'Ward Round Agent', version: '0.9.1' };
const AGENT_NAMED = `MCP client: ${AGENT.name} ${AGENT.version}`;
const ABOUT_MARIA = 'Is Maria due for a potassium check?';

/** The rows of the list on the page (its header row aside). */
function resultRows(page: Page): Locator {
  return page.locator('table tbody tr');
}

/** Waits until the list shows `count` rows (the server's answer to the last search). */
async function rowsCount(page: Page, count: number): Promise<void> {
  // Polled from the test: the app's Content-Security-Policy lets no string be evaluated in the page.
  await waitFor(async () => ((await resultRows(page).count()) === count ? true : undefined), 30_000);
}

/** Presses Tab until `target` has the focus: what a keyboard reaches, in the page's own order. */
async function tabTo(page: Page, target: Locator, presses = 60): Promise<void> {
  for (let press = 0; press < presses; press += 1) {
    await page.keyboard.press('Tab');
    if ((await target.and(page.locator(':focus')).count()) === 1) {
      return;
    }
  }
  throw new Error('the keyboard never reached the element');
}

/** Opens the focused Mantine select with the keyboard, moves to `option` and picks it. */
async function pickWithKeyboard(page: Page, option: string): Promise<void> {
  await page.keyboard.press('ArrowDown');
  await page.getByRole('option', { name: option }).waitFor();
  for (let press = 0; press < 5; press += 1) {
    if ((await page.locator('[data-combobox-selected]').innerText().catch(() => '')) === option) {
      await page.keyboard.press('Enter');
      return;
    }
    await page.keyboard.press('ArrowDown');
  }
  throw new Error(`the keyboard never reached ${option}`);
}

(browserTestsRun() ? describe : describe.skip)("a reviewer reads MCP clients' disclosures with the chat's in the review console", () => {
  let review: ReviewHost;
  let browser: Browser;
  let maria: string;
  let conversationId: string;
  let mcpEvents: AuditEvent[];

  async function mcpCall(client: Client, name: string, args: Record<string, unknown>): Promise<void> {
    const answer = (await client.callTool({ name, arguments: args })) as { isError?: boolean };
    expect(answer.isError).toBeUndefined();
  }

  beforeAll(async () => {
    await ensureWebAppBuilt();
    review = await startReviewHost();
    const { host, project } = review;
    maria = project.ids['patient-in-care-team-1'];
    // As a project administrator allows it (docs/mcp.md); set before any MCP token is used, as the host keeps a token's project for a while.
    const stored = await host.store.readResource<Project>('Project', project.projectId);
    await host.store.updateResource<Project>({ ...stored, setting: [...(stored.setting ?? []), { name: MCP_PATIENT_DATA_SETTING, valueString: 'allow' }] });

    const chat = await review.api('v1/chat/completions', 'practitioner-membership', {
      method: 'POST',
      body: JSON.stringify({ model: CHAT_MODEL, messages: [{ role: 'user', content: ABOUT_MARIA }], patient_id: maria }),
    });
    expect(chat.status).toBe(200);
    conversationId = ((await chat.json()) as { conversation_id: string }).conversation_id;

    const token = await host.accessTokenFor(project.ids['practitioner-membership']);
    const transport = new StreamableHTTPClientTransport(new URL(`${host.url}projects/${project.projectId}/mcp`), { requestInit: { headers: { Authorization: `Bearer ${token}` } } });
    const client = new Client(AGENT, { versionNegotiation: { mode: 'auto' } });
    await client.connect(transport);
    try {
      await mcpCall(client, 'find_patients', { name: 'Lopez' });
      await mcpCall(client, 'read_record', { patient_id: maria, reference: `Patient/${maria}` });
    } finally {
      await client.close();
    }
    const events = (await (await review.api(`fhir/R4/AuditEvent?entity=Patient/${maria}&_count=100`, 'reviewer-membership')).json()) as Bundle<AuditEvent>;
    mcpEvents = (events.entry ?? []).flatMap((entry) => (entry.resource?.agent.some((agent) => agent.who?.display === AGENT_NAMED) ? [entry.resource] : []));
    expect(mcpEvents).toHaveLength(2);
    browser = await launchChromium();
  }, 180_000);

  afterAll(async () => {
    await browser?.close();
    await review?.close();
  });

  test("the reviewer tells the MCP client's disclosures from the chat's, narrows the list to them and exports them", async () => {
    const context = await browser.newContext({ viewport: { width: 1200, height: 800 } });
    const page = await context.newPage();
    await review.signIn(page, REVIEWER);
    await page.getByRole('tab', { name: 'Disclosures' }).click();

    // One list: the MCP client's two disclosures and the chat's, each saying where the records went.
    const mcpRows = resultRows(page).filter({ hasText: AGENT_NAMED });
    await waitFor(async () => ((await mcpRows.count()) === 2 ? true : undefined), 30_000);
    await mcpRows.filter({ hasText: 'Tool: find_patients' }).waitFor();
    await mcpRows.filter({ hasText: 'Tool: read_record' }).waitFor();
    const chatRow = resultRows(page).filter({ hasText: 'Patient context sent to the AI model' });
    await chatRow.getByText(`AI model: ${CHAT_MODEL}`).waitFor();
    await expect(chatRow.getByText(AGENT_NAMED).count()).resolves.toBe(0);
    // Asked by Dr. Carter, by name; the chart stays unread (the reviewer's policy reads no Patient).
    await expect(mcpRows.filter({ hasText: 'Alice Carter' }).count()).resolves.toBe(2);
    expect(await page.locator('table').innerText()).not.toMatch(/Maria|Lopez/);
    await page.screenshot({ path: `${DOCS_IMAGES}app-review-mcp-disclosures.png`, fullPage: true });
    expect(await accessibilityViolations(page)).toEqual([]);

    // An MCP client's disclosure has no reply in fhirgate: its row opens nothing, and the list stays.
    await mcpRows.first().click();
    await page.waitForTimeout(500);
    expect(new URL(page.url()).pathname).toBe('/fhirgate/app/review');
    await expect(mcpRows.count()).resolves.toBe(2);

    // With the keyboard: "Sent to" MCP clients, for Maria, then Search.
    const filters = page.getByRole('form', { name: 'Filter the disclosures' });
    await filters.getByLabel('Patient id').fill(maria);
    const sentTo = filters.getByRole('textbox', { name: 'Sent to' });
    await tabTo(page, sentTo);
    await pickWithKeyboard(page, 'MCP clients');
    await expect(sentTo.inputValue()).resolves.toBe('MCP clients');
    await tabTo(page, filters.getByRole('button', { name: 'Search' }));
    await page.keyboard.press('Enter');
    await rowsCount(page, 2);
    await expect(mcpRows.count()).resolves.toBe(2);
    expect(await accessibilityViolations(page)).toEqual([]);

    // The export holds what the list holds: the MCP client's AuditEvents, and no reply (there is none).
    const [download] = await Promise.all([page.waitForEvent('download'), page.getByRole('button', { name: 'Export these disclosures' }).click()]);
    const exported = JSON.parse(await readFile((await download.path()) ?? '', 'utf8')) as Bundle;
    const records = (exported.entry ?? []).flatMap((entry): Resource[] => (entry.resource ? [entry.resource] : []));
    expect(records.map((record) => record.id).sort()).toEqual(mcpEvents.map((event) => event.id).sort());
    expect(download.suggestedFilename()).toContain('-mcp-');

    // Per user: Dr. Carter's disclosures to MCP clients are the agent's two; to the chat's models, the chat's alone.
    await filters.getByLabel('Patient id').fill('');
    await page.getByRole('textbox', { name: 'User' }).click();
    await page.getByRole('option', { name: 'Alice Carter' }).click();
    await filters.getByRole('button', { name: 'Search' }).click();
    await rowsCount(page, 2);
    await sentTo.click();
    await page.getByRole('option', { name: "The chat's AI models" }).click();
    await filters.getByRole('button', { name: 'Search' }).click();
    await waitFor(async () => ((await mcpRows.count()) === 0 && (await chatRow.count()) > 0 ? true : undefined), 30_000);

    // A chat's disclosure links to its conversation, reached and followed with the keyboard.
    const open = chatRow.first().getByRole('link', { name: 'Open the conversation' });
    await tabTo(page, open);
    await page.keyboard.press('Enter');
    await page.waitForURL(`**/review/conversations/${conversationId}`);
    await context.close();
  }, 180_000);

  test("a practitioner is refused the MCP client's disclosures, as every disclosure", async () => {
    const context = await browser.newContext({ viewport: { width: 1200, height: 800 } });
    const page = await context.newPage();
    await review.signIn(page, CLINICIAN);
    await page.getByRole('tab', { name: 'Disclosures' }).click();
    await page.getByText(/forbidden/i).first().waitFor();
    await expect(resultRows(page).filter({ hasText: AGENT_NAMED }).count()).resolves.toBe(0);
    const refused = await review.api('fhir/R4/AuditEvent?entity-role=1&entity-role:not=3', 'practitioner-membership');
    expect(refused.status).toBe(403);
    await context.close();
  }, 180_000);
});
