/**
 * Builds the store file of the scale benchmark: the demo project and its AI agent (through the host's and the
 * plugin's own code), then, bulk-loaded (bench/lib/bulk-store.ts) with the store's own index rows, the chart of a
 * care-team patient (Maria Lopez), the conversations the measured requests continue, and as much of everything
 * else as the plan says: other patients and their charts, monitors' readings, and the practitioner's own other
 * conversations.
 */
import { randomUUID } from 'node:crypto';
import { rmSync } from 'node:fs';
import { join } from 'node:path';
import type { Communication, Device, Resource } from '@medplum/fhirtypes';
import { STORE_FILE_NAME } from '../../plugin/hosts/standalone/open-store.ts';
import { SearchIndexSpec } from '../../plugin/hosts/standalone/store/search-index.ts';
import { buildSeededConversation, type ConversationOwner } from '../history/bulk-communications.ts';
import { IndexRowChecker, communicationIndexRows } from '../history/communication-index-rows.ts';
import { DEMO, seedProjectAndAgent } from '../history/seed-store.ts';
import { BulkStore } from '../lib/bulk-store.ts';
import {
  allergy,
  chartObservation,
  condition,
  deviceObservation,
  medicationRequest,
  medicationStatement,
  patient,
  type ChartAuthors,
  type Stored,
} from './chart-resources.ts';

/** What to put in the store. */
export interface ScalePlan {
  /** Observations in the chart of the patient the measured turns are about. */
  readonly chartObservations: number;
  /** Observations in the project about other patients and about monitors. */
  readonly otherObservations: number;
  /** Communications of the practitioner's other conversations (about the care-team patients, or none). */
  readonly callerCommunications: number;
  /** Conversations about the patient that the measured requests continue, one per request. */
  readonly measuredConversations: number;
  /** Earlier turns of each of those conversations. */
  readonly earlierTurns: number;
}

/** What the seeded store holds, for the load and the report. */
export interface ScaleSeeded {
  readonly measuredConversationIds: readonly string[];
  readonly resources: Readonly<Record<string, number>>;
  readonly seedSeconds: number;
}

/** The demo practitioner's client: `meta.author` of what the integration writes. */
const INTEGRATION = 'ClientApplication/a1f0c0de-0000-4000-8000-000000000601';
const DEMO_DEVICE = 'Device/a1f0c0de-0000-4000-8000-000000000701';
/** Of the other Observations, this share is monitors' readings; the rest are other patients'. */
const DEVICE_SHARE = 0.3;
const OBSERVATIONS_PER_OTHER_PATIENT = 200;
const MONITORS = 20;
const MAX_TURNS = 20;
const YEAR_MILLIS = 365 * 24 * 3600 * 1000;

/** Writes a new store file into `dataDir` as `plan` says. */
export async function seedScaleStore(dataDir: string, plan: ScalePlan): Promise<ScaleSeeded> {
  const started = performance.now();
  const path = join(dataDir, STORE_FILE_NAME);
  for (const suffix of ['', '-wal', '-shm']) {
    rmSync(path + suffix, { force: true });
  }
  const agent = await seedProjectAndAgent(path);
  const load = new ScaleLoad(path);
  try {
    const authors: ChartAuthors = { projectId: DEMO.projectId, practitioner: DEMO.practitioner, integration: INTEGRATION };
    const now = Date.now();
    const maria = DEMO.patients[0];
    writeChart(load, authors, maria, plan.chartObservations, now);
    writeChart(load, authors, DEMO.patients[1], 0, now);
    const monitors = writeMonitors(load, authors);
    const deviceReadings = Math.round(plan.otherObservations * DEVICE_SHARE);
    for (let index = 0; index < deviceReadings; index++) {
      // About no one, or filed into another patient's chart by a bedside monitor.
      const device = monitors[index % monitors.length];
      load.insert(index % 2 === 0 ? deviceObservation(authors, device, index, now) : deviceObservation(authors, DEMO_DEVICE, index, now));
    }
    const patientReadings = plan.otherObservations - deviceReadings;
    for (let written = 0, index = 0; written < patientReadings; index++) {
      const other = patient(authors, index);
      load.insert(other);
      const readings = Math.min(OBSERVATIONS_PER_OTHER_PATIENT, patientReadings - written);
      writeChart(load, authors, `Patient/${other.id}`, readings, now, monitors[index % monitors.length]);
      written += readings;
    }
    const conversationOwner = (subject: string | undefined): ConversationOwner => ({ projectId: DEMO.projectId, caller: DEMO.practitioner, agent, subject });
    const measuredConversationIds: string[] = [];
    for (let index = 0; index < plan.measuredConversations; index++) {
      const conversation = buildSeededConversation(conversationOwner(maria), plan.earlierTurns, now - YEAR_MILLIS + index * 60_000);
      load.insertCommunications(conversation.resources);
      measuredConversationIds.push(conversation.rootId);
    }
    for (let written = 0, index = 0; written < plan.callerCommunications; index++) {
      const subject = [maria, DEMO.patients[1], undefined][index % 3];
      const turns = 1 + ((index * 7919) % MAX_TURNS);
      const conversation = buildSeededConversation(conversationOwner(subject), turns, now - 2 * YEAR_MILLIS + index * 60_000);
      const resources = conversation.resources.slice(0, plan.callerCommunications - written);
      load.insertCommunications(resources);
      written += resources.length;
    }
    load.finish();
    return { measuredConversationIds, resources: load.counts(), seedSeconds: (performance.now() - started) / 1000 };
  } finally {
    load.close();
  }
}

/** A chart: problems, prescriptions, reported medications, allergies, and `observations` readings. */
function writeChart(load: ScaleLoad, authors: ChartAuthors, patientReference: string, observations: number, now: number, monitor?: string): void {
  for (let index = 0; index < 8; index++) {
    load.insert(condition(authors, patientReference, index, now));
    load.insert(medicationRequest(authors, patientReference, index, now));
  }
  for (let index = 0; index < 3; index++) {
    load.insert(medicationStatement(authors, patientReference, index, now));
    load.insert(allergy(authors, patientReference, index));
  }
  for (let index = 0; index < observations; index++) {
    // Every fifth reading comes from a bedside monitor.
    load.insert(chartObservation(authors, patientReference, index, now, monitor && index % 5 === 4 ? monitor : undefined));
  }
}

function writeMonitors(load: ScaleLoad, authors: ChartAuthors): string[] {
  return Array.from({ length: MONITORS }, (_, index) => {
    const device: Stored<Device> = {
      resourceType: 'Device',
      id: randomUUID(),
      meta: { project: authors.projectId, author: { reference: INTEGRATION }, compartment: [{ reference: `Project/${authors.projectId}` }] },
      status: 'active',
      identifier: [{ system: 'urn:fhirgate:demo:device', value: `ward-monitor-${index}` }],
    };
    load.insert(device);
    return `Device/${device.id}`;
  });
}

/** The bulk load with the store's own index rows (Communications: built from their fields, checked on samples). */
class ScaleLoad {
  readonly #store: BulkStore;
  readonly #spec = new SearchIndexSpec();
  readonly #checker = new IndexRowChecker(this.#spec, 997);
  readonly #counts: Record<string, number> = {};

  constructor(path: string) {
    this.#store = new BulkStore(path);
  }

  insert(resource: Stored<Resource>): void {
    const meta = resource.meta as { lastUpdated?: string };
    const effective = (resource as { effectiveDateTime?: string }).effectiveDateTime;
    this.#store.insert(resource, effective ?? meta.lastUpdated ?? new Date().toISOString(), (stored) => this.#spec.rowsFor(stored));
    this.#count(resource.resourceType);
  }

  insertCommunications(resources: readonly Communication[]): void {
    for (const resource of resources) {
      this.#store.insert(resource as Communication & { id: string }, resource.sent as string, (stored, content) => {
        const rows = communicationIndexRows(stored);
        this.#checker.check(content, rows);
        return rows;
      });
      this.#count('Communication');
    }
  }

  counts(): Record<string, number> {
    return { ...this.#counts };
  }

  finish(): void {
    this.#store.finish();
  }

  close(): void {
    this.#store.close();
  }

  #count(resourceType: string): void {
    this.#counts[resourceType] = (this.#counts[resourceType] ?? 0) + 1;
  }
}
