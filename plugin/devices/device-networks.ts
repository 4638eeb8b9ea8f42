/**
 * The networks a device may come from (`device_auth.allowed_networks`, `allowed_networks_per_device`): addresses
 * and CIDR ranges, IPv4 and IPv6, matched with node:net's BlockList. BlockList also matches an IPv4-mapped IPv6
 * address (`::ffff:10.1.2.3`, what a dual-stack socket reports for an IPv4 peer) against IPv4 ranges and the
 * reverse, so a ward's `10.1.2.0/24` admits its monitors however the server's socket is bound.
 */
import { BlockList, isIP } from 'node:net';

/** One network as written: an address (`10.1.2.3`, `fd00::7`) or a CIDR range (`10.1.2.0/24`, `fd00:1::/64`). */
export interface ParsedNetwork {
  readonly address: string;
  readonly family: 'ipv4' | 'ipv6';
  /** Undefined for a single address. */
  readonly prefix?: number;
}

/** Parses one entry; undefined when it is neither an address nor a CIDR range. */
export function parseNetwork(entry: string): ParsedNetwork | undefined {
  const [address = '', prefixText, ...rest] = entry.trim().split('/');
  const version = isIP(address);
  if (version === 0 || rest.length > 0) {
    return undefined;
  }
  const family = version === 4 ? 'ipv4' : 'ipv6';
  if (prefixText === undefined) {
    return { address, family };
  }
  if (!/^\d{1,3}$/.test(prefixText) || Number(prefixText) > (version === 4 ? 32 : 128)) {
    return undefined;
  }
  return { address, family, prefix: Number(prefixText) };
}

/** A set of networks: does an address belong to one of them? */
export interface NetworkList {
  /** True when `address` is in one of the networks; false for a missing, unparseable or zoned address. */
  includes(address: string | undefined): boolean;
  /** The entries as written, for messages. */
  readonly entries: readonly string[];
}

/** Builds a list from parsed networks. */
export function createNetworkList(entries: readonly string[], networks: readonly ParsedNetwork[]): NetworkList {
  const blockList = new BlockList();
  for (const network of networks) {
    if (network.prefix === undefined) {
      blockList.addAddress(network.address, network.family);
    } else {
      blockList.addSubnet(network.address, network.prefix, network.family);
    }
  }
  return {
    entries,
    includes: (address) => {
      const version = address ? isIP(address) : 0;
      // A zoned address (`fe80::1%eth0`, how Node reports a link-local peer) names a host on one link only; BlockList
      // reads entries and addresses without their zone, and would admit that address from every link: in no network.
      if (!address || version === 0 || address.includes('%')) {
        return false;
      }
      return blockList.check(address, version === 4 ? 'ipv4' : 'ipv6');
    },
  };
}

/** Which networks each device may come from: its own list, else the list for all devices, else anywhere. */
export interface DeviceNetworks {
  /** True when the device may present itself from `address`. */
  allows(deviceId: string, address: string | undefined): boolean;
  /** True when any list is configured (a device without one may come from anywhere). */
  readonly restricted: boolean;
}

/** Builds the per-device lookup; a device's own list applies instead of the list for all devices. */
export function createDeviceNetworks(forAllDevices: NetworkList | undefined, perDevice: ReadonlyMap<string, NetworkList>): DeviceNetworks {
  return {
    restricted: forAllDevices !== undefined || perDevice.size > 0,
    allows: (deviceId, address) => {
      const list = perDevice.get(deviceId) ?? forAllDevices;
      return list === undefined || list.includes(address);
    },
  };
}
