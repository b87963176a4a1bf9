/** Outbound HTTP with the SSRF guard: the only way Parley reaches a user-supplied URL. */
export { checkUrl, parseAllowList, isAllowListed, endpointKey, type UrlCheck, type CheckOptions } from './url-check.ts';
export { classifyAddress, blockedHostName, describeRange, type AddressVerdict } from './address.ts';
export {
  outboundFetch,
  OutboundError,
  DEFAULT_MAX_RESPONSE_BYTES,
  type OutboundInit,
  type OutboundOptions,
  type OutboundResponse,
  type OutboundReason,
  type Resolver,
  type ResolvedAddress,
} from './fetch.ts';
export { outboundStream, type OutboundStream, type OutboundStreamInit } from './stream.ts';
