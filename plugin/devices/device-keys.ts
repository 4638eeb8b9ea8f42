/**
 * Checks a device's API key against its pre-registered keys: case-sensitive, and in constant time whatever the
 * device or the key's length. Keys are compared as SHA-256 digests (always 32 bytes) with `timingSafeEqual`, and
 * an unknown device is compared against a random digest, so neither the key's length nor whether the device
 * exists shows in the timing. The keys themselves are not kept.
 */
import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';

/** Answers whether `apiKey` is a valid key of `deviceId`. */
export type DeviceKeyCheck = (deviceId: string, apiKey: string) => boolean;

/** Builds the check from the configured keys (device id → its valid keys). */
export function createDeviceKeyCheck(validKeys: ReadonlyMap<string, readonly string[]>): DeviceKeyCheck {
  const digestsByDevice = new Map<string, Buffer[]>();
  for (const [deviceId, keys] of validKeys) {
    digestsByDevice.set(deviceId, keys.map(digest));
  }
  // Stryker disable next-line ArrayDeclaration: with no candidate an unknown device is still refused; the random digest only evens out the timing, by one 32-byte comparison, which no test can measure.
  const unknownDevice = [randomBytes(32)];
  return (deviceId, apiKey) => {
    const presented = digest(apiKey);
    const known = digestsByDevice.get(deviceId);
    let matched = false;
    for (const candidate of known ?? unknownDevice) {
      // No early exit: every candidate is compared.
      matched = timingSafeEqual(candidate, presented) || matched;
    }
    return matched && known !== undefined;
  };
}

function digest(key: string): Buffer {
  return createHash('sha256').update(key, 'utf8').digest();
}
