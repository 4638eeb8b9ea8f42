/**
 * `FHIRGATE_TRUST_PROXY`: which peers the standalone host believes about `X-Forwarded-For` (Express's `trust proxy`),
 * so that `request.ip`, the source address device networks, failed-attempt limits and AuditEvents use, is the
 * client's and not a forwarded value anyone can write. Unset: `loopback`, a reverse proxy on the same machine.
 */
import { parseNetwork } from '../../devices/device-networks.ts';

/** What Express's `trust proxy` accepts of the forms offered here: everyone, a hop count, or named peers. */
export type TrustProxy = boolean | number | readonly string[];

/** The default: a reverse proxy on the same machine. */
export const DEFAULT_TRUST_PROXY: TrustProxy = ['loopback'];

/** proxy-addr's names for address ranges. */
const NAMED_RANGES = new Set(['loopback', 'linklocal', 'uniquelocal']);

/**
 * Parses the setting: `true` or `false`; a number of hops (the last N peers are proxies); or addresses, CIDR ranges
 * and `loopback` / `linklocal` / `uniquelocal`, separated by commas. Throws naming the entry that is none of these.
 */
export function parseTrustProxy(text: string | undefined, setting = 'FHIRGATE_TRUST_PROXY'): TrustProxy {
  const value = text?.trim();
  if (!value) {
    return DEFAULT_TRUST_PROXY;
  }
  if (value === 'true' || value === 'false') {
    return value === 'true';
  }
  if (/^\d+$/.test(value)) {
    return Number(value);
  }
  const entries = value.split(',').map((entry) => entry.trim());
  for (const entry of entries) {
    if (!NAMED_RANGES.has(entry) && !parseNetwork(entry)) {
      throw new Error(`${setting}: ${JSON.stringify(entry)} is not an address, a CIDR range, loopback, linklocal or uniquelocal`);
    }
  }
  return entries;
}
