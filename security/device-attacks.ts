/**
 * Device keys: keys of the wrong length or shape are a 4xx, never a 5xx; guessing keys quickly runs into the
 * failed-attempt limits (429) and every refusal is on record (one by one, or counted in a summary); and the time to
 * refuse a key that differs in its last character is no different, beyond noise, from one that differs in its
 * first (the comparison is constant-time).
 */
import { performance } from 'node:perf_hooks';
import type { AuditEvent } from '@medplum/fhirtypes';
import { createFhirgatePlugin } from '../plugin/create-plugin.ts';
import { postJsonFrom } from '../test/support/from-address.ts';
import type { SecurityContext } from './context.ts';
import { refused } from './suite.ts';

const KIND = 'device keys';
export const DEVICE_ID = 'sec-monitor-1';
export const DEVICE_KEY = 'Sec-Device-Key-0123456789abcdef-XYZ';
export const DEVICE_SYSTEM = 'urn:example:security-suite';
const GUESSER = '127.0.3.1';

export async function deviceAttacks(context: SecurityContext): Promise<void> {
  const { log, host } = context;
  const exchange = async (body: unknown): Promise<number> => {
    const response = await fetch(`${host.url}account/api/token/device/`, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(body) });
    await response.arrayBuffer();
    return response.status;
  };
  const pause = (milliseconds: number) => new Promise((resolve) => setTimeout(resolve, milliseconds));

  const shapes: [string, unknown][] = [
    ['an empty key', ''],
    ['a one-character key', 'x'],
    ['a key one character short', DEVICE_KEY.slice(0, -1)],
    ['a key one character long', `${DEVICE_KEY}x`],
    ['a 100 KB key', 'k'.repeat(100_000)],
    ['a key of multi-byte characters', 'ключ-🔑'.repeat(6)],
    ['a key with a NUL byte', `${DEVICE_KEY.slice(0, 5)}\u0000${DEVICE_KEY.slice(6)}`],
    ['a numeric key', 12345],
    ['an object as key', { $ne: null }],
    ['the right key in another case', DEVICE_KEY.toLowerCase()],
  ];
  for (const [name, apiKey] of shapes) {
    // A body over the route's 16 KB limit is refused before it is read (413); past the failed-attempt limit, 429.
    await log.run(KIND, name, async () => refused(await exchange({ device_id: DEVICE_ID, api_key: apiKey }), [400, 403, 413, 429]));
    await pause(60);
  }
  // The host registers unknown devices (auto_register): a refused exchange must not have registered one.
  const registered = async (deviceId: string): Promise<boolean> =>
    ((await host.store.search({ resourceType: 'Device', filters: [{ code: 'identifier', operator: 'eq', value: `${DEVICE_SYSTEM}|${deviceId}` }] })).entry?.length ?? 0) > 0;
  await log.run(KIND, 'an unknown device id with a valid key of another device', async () => {
    const status = await exchange({ device_id: 'sec-intruder', api_key: DEVICE_KEY });
    return refused(status, [403, 429], (await registered('sec-intruder')) ? 'a Device was registered for the unknown id' : undefined);
  });

  // Constant time: refusing a near miss (last character wrong) against a far miss (first character wrong). Both
  // take the same path: the key check, then the failure count (403, or 429 once locked out).
  await pause(1100);
  const nearMiss = `${DEVICE_KEY.slice(0, -1)}${DEVICE_KEY.at(-1) === 'Z' ? 'Y' : 'Z'}`;
  const farMiss = `${DEVICE_KEY[0] === 'A' ? 'B' : 'A'}${DEVICE_KEY.slice(1)}`;
  const near: number[] = [];
  const far: number[] = [];
  for (let round = 0; round < 40; round++) {
    for (const [key, samples] of round % 2 ? ([[nearMiss, near], [farMiss, far]] as const) : ([[farMiss, far], [nearMiss, near]] as const)) {
      const started = performance.now();
      const status = await exchange({ device_id: DEVICE_ID, api_key: key });
      if (status === 403 || status === 429) samples.push(performance.now() - started);
    }
    await pause(120);
  }
  const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)] ?? Number.NaN;
  const difference = median(near) - median(far);
  log.figure(
    'device key timing',
    `near miss ${median(near).toFixed(3)} ms, far miss ${median(far).toFixed(3)} ms (medians of ${near.length} and ${far.length} refusals over HTTP): difference ${difference.toFixed(3)} ms`
  );

  // Guessing, from an address of its own: far more tries per second than the limits. Past them, 429; every refusal
  // on record, the first few one by one and the rest in a summary once its period is over.
  await pause(1100);
  const statuses = (
    await Promise.all(Array.from({ length: 60 }, (_, index) => postJsonFrom(`${host.url}account/api/token/device/`, GUESSER, { device_id: DEVICE_ID, api_key: `guess-${index}-${DEVICE_KEY.slice(8)}` })))
  ).map((response) => response.status);
  const limited = statuses.filter((status) => status === 429).length;
  await log.run(KIND, '60 guesses at once', async () => ({
    status: limited ? 429 : 403,
    letThrough: statuses.some((status) => status === 200) || limited === 0,
    note: `${limited} of 60 refused with 429`,
  }));
  let onRecord = (await refusalRecordsFrom(context, GUESSER)).counted;
  for (const waitUntil = Date.now() + 15_000; onRecord < statuses.length && Date.now() < waitUntil; ) {
    await pause(250);
    onRecord = (await refusalRecordsFrom(context, GUESSER)).counted;
  }
  await log.run(KIND, 'every refused guess is on record', async () => ({
    status: 0,
    letThrough: onRecord !== statuses.length,
    note: `${onRecord} refusals on record for ${statuses.length} guesses`,
  }));
}

/**
 * Keys too weak to resist guessing, in the configuration: a server must refuse to start with them, in one line
 * naming the device and the rule (and never the key). Too short for 128 bits, or long enough but of too few
 * different characters (41 zeros count as 136 bits by length alone).
 */
export async function weakKeyAttacks(context: SecurityContext): Promise<void> {
  const lengthRule = 'at least 128 bits';
  const varietyRule = 'at least 8 different characters';
  const weakKeys: [string, string, string][] = [
    ['a dictionary word with digits', 'password123', lengthRule],
    ['a 31-digit hex key (124 bits)', 'a3f9'.repeat(7) + 'b2c', lengthRule],
    ['a 21-character base64url key (126 bits)', 'Zq8-Lm3_Xv7'.repeat(2).slice(0, 21), lengthRule],
    ['a key of 41 zeros', '0'.repeat(41), varietyRule],
    ['a key of 64 zeros (the length of `openssl rand -hex 32`)', '0'.repeat(64), varietyRule],
    ['a key of one letter repeated 43 times', 'a'.repeat(43), varietyRule],
    ['a key of two characters alternating', 'Ab'.repeat(22), varietyRule],
    ['a 40-digit key of 4 different digits', '1234'.repeat(10), varietyRule],
    ['a 32-digit hex key of 7 different digits', 'abc1234'.repeat(5).slice(0, 32), varietyRule],
  ];
  for (const [name, key, rule] of weakKeys) {
    await context.log.run(KIND, `${name} as a configured device key`, async () => {
      try {
        createFhirgatePlugin(context.host.standalone.host, {
          device_auth: { valid_keys: { 'weak-monitor': key }, jwt_secret: 'w'.repeat(40), identifier_system: DEVICE_SYSTEM, project_id: context.projectA.projectId },
        });
      } catch (error) {
        const message = error instanceof Error ? error.message : String(error);
        const clear = message.includes('device weak-monitor') && message.includes(rule) && !message.includes(key) && !message.includes('\n');
        return { status: 0, letThrough: !clear, note: clear ? undefined : `refused, but not in one line naming the device and the rule: ${message.slice(0, 200)}` };
      }
      return { status: 0, letThrough: true, note: 'the plugin started with it' };
    });
  }
}

/** AuditEvents of refusals from `address`, and how many refusals they hold (a summary holds its count). */
export async function refusalRecordsFrom(context: SecurityContext, address: string): Promise<{ events: number; counted: number }> {
  const bundle = await context.host.store.search<AuditEvent>({ resourceType: 'AuditEvent', filters: [{ code: 'address', operator: 'eq', value: address }], count: 1000 });
  let events = 0;
  let counted = 0;
  for (const event of bundle.entry?.map((entry) => entry.resource) ?? []) {
    if (event?.outcome !== '4') continue;
    events++;
    const details = event.entity?.[0]?.detail ?? [];
    const summary = details.some((detail) => detail.type === 'reason' && detail.valueString === 'summary');
    counted += summary ? Number(details.find((detail) => detail.type === 'count')?.valueString ?? 0) : 1;
  }
  return { events, counted };
}
