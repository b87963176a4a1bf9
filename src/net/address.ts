/**
 * Which destinations outbound requests may reach. Two questions, answered the same way for
 * a URL written by a user and for an address returned by DNS at connect time:
 * is this IP address public unicast, and is this host name one that can only mean "here"
 * or "the cloud metadata service"?
 */
import { isIP } from 'node:net';
import ipaddr from 'ipaddr.js';

/** Why an address is refused: a range name from ipaddr.js, or one of ours. */
export type BlockedRange = string;

export type AddressVerdict = { allowed: true } | { allowed: false; range: BlockedRange };

/** Metadata endpoints named explicitly; most also fall in a blocked range, which is fine. */
const METADATA_ADDRESSES = new Set(['169.254.169.254', '169.254.170.2', '100.100.100.200', '192.0.0.192', 'fd00:ec2::254']);

/**
 * IPv6 ranges that carry an IPv4 address: the embedded address decides.
 * The offset is the byte position of the four IPv4 bytes.
 */
const V6_EMBEDDING_V4: { prefix: [ipaddr.IPv6, number]; offset: number }[] = [
  { prefix: ipaddr.IPv6.parseCIDR('::ffff:0:0/96'), offset: 12 }, // IPv4-mapped
  { prefix: ipaddr.IPv6.parseCIDR('::ffff:0:0:0/96'), offset: 12 }, // IPv4-translated (RFC 6145)
  { prefix: ipaddr.IPv6.parseCIDR('64:ff9b::/96'), offset: 12 }, // NAT64 well-known prefix
  { prefix: ipaddr.IPv6.parseCIDR('2002::/16'), offset: 2 }, // 6to4
];

/** Only the IANA global unicast block is reachable for IPv6; `::/8` holds IPv4-compatible forms. */
const V6_GLOBAL_UNICAST = ipaddr.IPv6.parseCIDR('2000::/3');

const RANGE_LABELS: Record<string, string> = {
  linkLocal: 'link-local',
  uniqueLocal: 'unique-local',
  carrierGradeNat: 'carrier-grade NAT',
  metadata: 'cloud metadata',
  deprecatedSiteLocal: 'site-local',
  rfc6052: 'NAT64',
  rfc6145: 'IPv4-translated',
  ipv4Mapped: 'IPv4-mapped',
};

/** A readable name for a blocked range, for messages: `linkLocal` → `link-local`. */
export function describeRange(range: BlockedRange): string {
  const embedded = range.endsWith(' (embedded IPv4)');
  const base = embedded ? range.slice(0, -' (embedded IPv4)'.length) : range;
  const label = RANGE_LABELS[base] ?? base;
  return embedded ? `${label} IPv4 embedded in IPv6` : label;
}

function classifyV4(addr: ipaddr.IPv4): AddressVerdict {
  if (METADATA_ADDRESSES.has(addr.toString())) return { allowed: false, range: 'metadata' };
  const range = addr.range();
  return range === 'unicast' ? { allowed: true } : { allowed: false, range };
}

function classifyV6(addr: ipaddr.IPv6): AddressVerdict {
  if (METADATA_ADDRESSES.has(addr.toString())) return { allowed: false, range: 'metadata' };
  for (const { prefix, offset } of V6_EMBEDDING_V4) {
    if (addr.match(prefix)) {
      const bytes = addr.toByteArray().slice(offset, offset + 4);
      const inner = classifyV4(new ipaddr.IPv4(bytes));
      return inner.allowed ? inner : { allowed: false, range: `${inner.range} (embedded IPv4)` };
    }
  }
  const range = addr.range();
  if (range !== 'unicast') return { allowed: false, range };
  // ipaddr.js calls anything unlisted "unicast", including ::7f00:1 (IPv4-compatible) and
  // unassigned space; outside 2000::/3 nothing is routable on the internet.
  if (!addr.match(V6_GLOBAL_UNICAST)) return { allowed: false, range: 'reserved' };
  return { allowed: true };
}

/**
 * Classify an IP address in canonical text form (as WHATWG URL or DNS give it; IPv6 without
 * brackets). Anything that is not a plain IPv4 or IPv6 address is refused as `invalid`:
 * lenient forms such as `127.1` must have been normalised by the URL parser first.
 */
export function classifyAddress(ip: string): AddressVerdict {
  const family = isIP(ip);
  if (family === 0) return { allowed: false, range: 'invalid' };
  const addr = ipaddr.parse(ip);
  return addr.kind() === 'ipv4' ? classifyV4(addr as ipaddr.IPv4) : classifyV6(addr as ipaddr.IPv6);
}

const BLOCKED_NAMES = new Set([
  'localhost',
  'localhost.localdomain',
  'localhost6',
  'localhost6.localdomain6',
  'ip6-localhost',
  'ip6-loopback',
  'metadata',
  'metadata.google.internal',
  'metadata.goog',
  'instance-data',
  'instance-data.ec2.internal',
]);

/**
 * Suffixes reserved for private use (RFC 6761, RFC 6762, RFC 8375, ICANN `.internal`):
 * such a name never denotes a public endpoint, so it is refused before any lookup.
 */
const BLOCKED_SUFFIXES = ['.localhost', '.localdomain', '.local', '.internal', '.home.arpa'];

/**
 * Whether a host name (already lower-cased by the URL parser) names the local machine, a
 * private-use zone or a metadata service. Trailing dots are ignored (`localhost.` is
 * `localhost`). Returns the reason, or null when the name may be resolved.
 */
export function blockedHostName(name: string): string | null {
  const bare = name.replace(/\.+$/, '');
  if (BLOCKED_NAMES.has(bare)) return bare.startsWith('metadata') || bare.startsWith('instance-data') ? 'cloud metadata' : 'localhost';
  for (const suffix of BLOCKED_SUFFIXES) {
    if (bare.endsWith(suffix) || bare === suffix.slice(1)) return suffix === '.localhost' ? 'localhost' : 'private-use domain';
  }
  return null;
}
