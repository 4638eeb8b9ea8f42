/**
 * Device keys: keys of the wrong length or shape are a 4xx, never a 5xx; guessing a key quickly runs into the
 * per-device limit (429) and every refusal is an AuditEvent; and the time to refuse a key that differs in its last
 * character is no different, beyond noise, from one that differs in its first (the comparison is constant-time).
 */
import { performance } from 'node:perf_hooks';
import type { SecurityContext } from './context.ts';
import { refused } from './suite.ts';

const KIND = 'device keys';
export const DEVICE_ID = 'sec-monitor-1';
export const DEVICE_KEY = 'Sec-Device-Key-0123456789abcdef-XYZ';

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
    // A body over the route's 16 KB limit is refused before it is read (413).
    await log.run(KIND, name, async () => refused(await exchange({ device_id: DEVICE_ID, api_key: apiKey }), [400, 403, 413]));
    await pause(60);
  }
  await log.run(KIND, 'an unknown device id with a valid key of another device', async () => refused(await exchange({ device_id: 'sec-intruder', api_key: DEVICE_KEY }), [403]));

  // Constant time: refusing a near miss (last character wrong) against a far miss (first character wrong).
  await pause(1100);
  const nearMiss = `${DEVICE_KEY.slice(0, -1)}${DEVICE_KEY.at(-1) === 'Z' ? 'Y' : 'Z'}`;
  const farMiss = `${DEVICE_KEY[0] === 'A' ? 'B' : 'A'}${DEVICE_KEY.slice(1)}`;
  const near: number[] = [];
  const far: number[] = [];
  for (let round = 0; round < 40; round++) {
    for (const [key, samples] of round % 2 ? ([[nearMiss, near], [farMiss, far]] as const) : ([[farMiss, far], [nearMiss, near]] as const)) {
      const started = performance.now();
      const status = await exchange({ device_id: DEVICE_ID, api_key: key });
      if (status === 403) samples.push(performance.now() - started);
    }
    await pause(120);
  }
  const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)] ?? Number.NaN;
  const difference = median(near) - median(far);
  log.figure(
    'device key timing',
    `near miss ${median(near).toFixed(3)} ms, far miss ${median(far).toFixed(3)} ms (medians of ${near.length} and ${far.length} refusals over HTTP): difference ${difference.toFixed(3)} ms`
  );

  // Guessing: far more tries per second than the limit. Some must be refused with 429, and every refusal audited.
  await pause(1100);
  const auditsBefore = await countAuditEvents(context);
  const statuses = await Promise.all(Array.from({ length: 60 }, (_, index) => exchange({ device_id: DEVICE_ID, api_key: `guess-${index}-${DEVICE_KEY.slice(8)}` })));
  const limited = statuses.filter((status) => status === 429).length;
  const auditsAfter = await countAuditEvents(context);
  await log.run(KIND, '60 guesses at once', async () => ({
    status: limited ? 429 : 403,
    letThrough: statuses.some((status) => status === 200) || limited === 0,
    note: `${limited} of 60 refused with 429, ${auditsAfter - auditsBefore} AuditEvents recorded`,
  }));
  await log.run(KIND, 'every refused guess is an AuditEvent', async () => ({
    status: 0,
    letThrough: auditsAfter - auditsBefore < statuses.filter((status) => status === 403).length,
    note: `${auditsAfter - auditsBefore} AuditEvents for ${statuses.length} guesses`,
  }));
}

async function countAuditEvents(context: SecurityContext): Promise<number> {
  const bundle = await context.host.store.search({ resourceType: 'AuditEvent', total: 'accurate', count: 0 });
  return bundle.total ?? 0;
}
