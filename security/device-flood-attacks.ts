/**
 * Floods on the device token route by callers without a key, each from a loopback address of its own (the host
 * sees 127.0.3.x as distinct sources):
 * - a stranger sending wrong keys for a real device's id while the device renews its token and writes
 *   Observations: the device must not notice (its budget is its own; failures are limited apart, by source and by
 *   device id), and the lockout that stops the stranger must not stop the right key;
 * - unknown device ids by the thousand: every refusal stays on record, but the store grows by a bounded number of
 *   AuditEvents (a few of their own per source and period, then one summary), not one per request.
 */
import { postJsonFrom, type ResponseFrom } from '../test/support/from-address.ts';
import type { SecurityContext } from './context.ts';
import { DEVICE_ID, DEVICE_KEY, DEVICE_SYSTEM, refusalRecordsFrom } from './device-attacks.ts';

const KIND = 'device keys';
const STRANGER = '127.0.3.2';
const DEVICE = '127.0.3.3';
const FLOODER = '127.0.3.4';

const CREATE_OBSERVATION =
  'mutation CreateObservation($input: ObservationInput!) { ObservationCreate(resource: $input) { id status code { coding { system code } } device { identifier { system value } } } }';

export async function deviceFloodAttacks(context: SecurityContext, windowSeconds: number): Promise<void> {
  const { log, host } = context;
  const tokenRoute = `${host.url}account/api/token/device/`;
  const pause = (milliseconds: number) => new Promise((resolve) => setTimeout(resolve, milliseconds));

  // A new window for the device's budget and the failure counts.
  await pause(windowSeconds * 1000 + 100);
  // For 2 s, a stranger sends wrong keys for the device's id, 10 at a time; meanwhile the device renews its token
  // every third tick and writes an Observation every tick (a tick is about 90 ms: some 14 requests a second, within
  // its 20).
  const strangerStatuses: number[] = [];
  const floodEnds = Date.now() + 2000;
  const stranger = (async () => {
    for (let round = 0; Date.now() < floodEnds; round++) {
      const answers = await Promise.all(Array.from({ length: 10 }, (_, index) => postJsonFrom(tokenRoute, STRANGER, { device_id: DEVICE_ID, api_key: `guess-${round}-${index}-${DEVICE_KEY}` })));
      strangerStatuses.push(...answers.map((answer) => answer.status));
    }
  })();
  const device = { exchanges: 0, exchangesFailed: 0, writes: 0, writesFailed: 0, statuses: new Set<number>() };
  let access = '';
  for (let tick = 0; Date.now() < floodEnds; tick++) {
    if (tick % 3 === 0) {
      const answer = await postJsonFrom(tokenRoute, DEVICE, { device_id: DEVICE_ID, api_key: DEVICE_KEY });
      device.exchanges++;
      device.statuses.add(answer.status);
      if (answer.status === 200) {
        access = (answer.body as { access: string }).access;
      } else {
        device.exchangesFailed++;
      }
    }
    if (access) {
      const answer = await writeObservation(host.url, access);
      device.writes++;
      device.statuses.add(answer.status);
      if (answer.status !== 200 || (answer.body as { errors?: unknown }).errors) device.writesFailed++;
    }
    await pause(75);
  }
  await stranger;
  const locked = strangerStatuses.filter((status) => status === 429).length;
  await log.run(KIND, `a stranger's ${strangerStatuses.length} wrong keys for a device's id while the device works`, async () => ({
    status: locked ? 429 : 403,
    letThrough: device.exchanges === 0 || device.exchangesFailed + device.writesFailed > 0 || strangerStatuses.includes(200) || locked === 0,
    note: `the device: ${device.exchanges - device.exchangesFailed} of ${device.exchanges} token renewals and ${device.writes - device.writesFailed} of ${device.writes} Observation writes succeeded (statuses ${[...device.statuses].join(', ')}); the stranger: ${strangerStatuses.length - locked} answered 403, ${locked} 429`,
  }));

  // The stranger's address and the device id are locked out for failing keys now; the right key is not.
  for (const [name, address] of [
    ['the right key from the locked-out address', STRANGER],
    ['the right key from another address while the device id is locked out for wrong keys', '127.0.3.5'],
  ] as const) {
    await log.run(KIND, name, async () => {
      const wrong = await postJsonFrom(tokenRoute, address, { device_id: DEVICE_ID, api_key: `still-${DEVICE_KEY}` });
      const right = await postJsonFrom(tokenRoute, address, { device_id: DEVICE_ID, api_key: DEVICE_KEY });
      return {
        status: right.status,
        letThrough: right.status !== 200 || wrong.status !== 429,
        note: right.status === 200 && wrong.status === 429 ? undefined : `a wrong key got ${wrong.status} (429 expected), the right key ${right.status} (200 expected)`,
      };
    });
  }

  // Unknown device ids by the thousand, 25 at a time.
  const sent = 1000;
  const started = Date.now();
  const statuses: number[] = [];
  for (let batch = 0; batch < sent / 25; batch++) {
    const answers = await Promise.all(Array.from({ length: 25 }, (_, index) => postJsonFrom(tokenRoute, FLOODER, { device_id: `ghost-${batch}-${index}`, api_key: 'x'.repeat(40) })));
    statuses.push(...answers.map((answer) => answer.status));
  }
  const periods = Math.ceil((Date.now() - started) / (windowSeconds * 1000)) + 1;
  // The last period's summary is written once the period is over.
  let records = await refusalRecordsFrom(context, FLOODER);
  for (const waitUntil = Date.now() + (windowSeconds + 10) * 1000; records.counted < sent && Date.now() < waitUntil; ) {
    await pause(250);
    records = await refusalRecordsFrom(context, FLOODER);
  }
  const bound = 6 * periods;
  await log.run(KIND, `${sent} unknown device ids from one address: refusals on record, AuditEvents bounded`, async () => ({
    status: statuses.includes(200) ? 200 : Math.max(...statuses),
    letThrough: statuses.some((status) => status < 400) || records.events > bound || records.counted !== sent,
    note: `${records.events} AuditEvents (at most ${bound} allowed: 5 of their own and a summary per period, over ${periods} periods) hold ${records.counted} of ${sent} refusals`,
  }));
}

function writeObservation(baseUrl: string, access: string): Promise<ResponseFrom> {
  return postJsonFrom(
    `${baseUrl}graphql`,
    DEVICE,
    {
      query: CREATE_OBSERVATION,
      variables: {
        input: {
          status: 'final',
          code: { coding: [{ system: 'http://loinc.org', code: '8867-4' }] },
          device: { identifier: { system: DEVICE_SYSTEM, value: DEVICE_ID } },
        },
      },
    },
    { Authorization: `Bearer ${access}` },
  );
}
