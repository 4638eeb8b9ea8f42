/**
 * Device networks: a ward monitor's right key, and its token, used from outside the ward's networks; an untrusted
 * peer writing a ward address into X-Forwarded-For; and a trusted proxy forwarding a ward address (admitted) and an
 * address outside the ward (refused). On a host of its own, bound to 127.0.0.1 and trusting only 127.0.0.2 as its
 * proxy, so that every other loopback address is an untrusted peer.
 */
import { postJsonFrom } from '../test/support/from-address.ts';
import { startTestHost, type TestHost } from '../test/support/test-host.ts';
import type { AttackLog } from './suite.ts';

const KIND = 'device networks';
const DEVICE_ID = 'sec-ward3-monitor';
const DEVICE_KEY = 'Sec-Ward3-Key-0123456789abcdef-XYZ';
const PROXY = '127.0.0.2';
const ATTACKER = '127.0.4.1';
const WARD_NETWORK = '10.20.3.0/24';
const WARD_ADDRESS = '10.20.3.14';
const OUTSIDE_WARD = '10.20.4.14';

export async function deviceNetworkAttacks(log: AttackLog): Promise<void> {
  let host: TestHost;
  try {
    host = await startTestHost({
      hostLimits: { trustProxy: [PROXY] },
      pluginFor: (project) => ({
        device_auth: {
          valid_keys: { [DEVICE_ID]: DEVICE_KEY },
          jwt_secret: 'security-suite-network-signing-secret-0123456789',
          identifier_system: 'urn:example:security-suite-networks',
          project_id: project.projectId,
          auto_register: true,
          allowed_networks_per_device: { [DEVICE_ID]: [WARD_NETWORK] },
        },
      }),
    });
  } catch (error) {
    // A server that cannot be told where its devices live lets them in from anywhere.
    const note = `no host with a network allowlist: ${error instanceof Error ? error.message.slice(0, 160) : String(error)}`;
    for (const name of ['the right key from outside the allowlist', 'a spoofed X-Forwarded-For from an untrusted peer', 'inside the allowlist through a trusted proxy']) {
      await log.run(KIND, name, async () => ({ status: 0, letThrough: true, note }));
    }
    return;
  }
  const exchange = (from: string, headers: Record<string, string> = {}) =>
    postJsonFrom(`${host.url}account/api/token/device/`, from, { device_id: DEVICE_ID, api_key: DEVICE_KEY }, headers);
  try {
    await log.run(KIND, 'the right key from outside the allowlist', async () => {
      const answer = await exchange(ATTACKER);
      return { status: answer.status, letThrough: answer.status === 200, note: answer.status === 200 ? 'a token was issued' : undefined };
    });
    await log.run(KIND, 'a spoofed X-Forwarded-For from an untrusted peer', async () => {
      const answer = await exchange(ATTACKER, { 'X-Forwarded-For': WARD_ADDRESS });
      return { status: answer.status, letThrough: answer.status === 200, note: answer.status === 200 ? 'a token was issued' : undefined };
    });
    await log.run(KIND, 'inside the allowlist through a trusted proxy', async () => {
      const inside = await exchange(PROXY, { 'X-Forwarded-For': WARD_ADDRESS });
      const outside = await exchange(PROXY, { 'X-Forwarded-For': OUTSIDE_WARD });
      // The proxy is believed both ways: the ward address admitted, an address outside the ward refused.
      const note = inside.status !== 200 ? `the ward's device was refused (${inside.status})` : outside.status === 200 ? 'a token was issued outside the ward' : undefined;
      return { status: outside.status, letThrough: note !== undefined, note };
    });
    await log.run(KIND, "the device's token presented from outside the allowlist", async () => {
      const issued = await exchange(PROXY, { 'X-Forwarded-For': WARD_ADDRESS });
      const token = (issued.body as { access?: string }).access ?? '';
      const answer = await postJsonFrom(`${host.url}graphql`, ATTACKER, { query: '{ ObservationList(_count: 1) { id } }' }, { Authorization: `Bearer ${token}`, 'X-Forwarded-For': WARD_ADDRESS });
      return { status: answer.status, letThrough: issued.status !== 200 || answer.status === 200, note: issued.status !== 200 ? 'no token to present' : undefined };
    });
  } finally {
    await host.close();
  }
}
