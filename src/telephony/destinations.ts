/**
 * Where calls may go (docs/api/phone.md): E.164 numbers in the country allow-list (US, CA,
 * JP), with the Japanese trunk zero normalized away and Japanese premium ranges blocked. Used
 * by outbound calls and by transfer destinations in the agent config.
 */

/** The countries calls may reach, with their calling codes. */
export const ALLOWED_DESTINATIONS = [
  { country: 'US', code: '+1' },
  { country: 'CA', code: '+1' },
  { country: 'JP', code: '+81' },
] as const;

/** `US (+1), CA (+1), JP (+81)`: how errors name the allowed codes. */
export const ALLOWED_DESTINATIONS_TEXT = ALLOWED_DESTINATIONS.map((d) => `${d.country} (${d.code})`).join(', ');

const E164 = /^\+[1-9][0-9]{1,14}$/;
/** Japanese premium-rate prefixes (national form 0570, 0990). */
const JP_PREMIUM = /^\+81(570|990)/;

export type DestinationCheck =
  | { ok: true; number: string; country: 'US' | 'CA' | 'JP' }
  | { ok: false; reason: 'destination_invalid' | 'destination_not_allowed' | 'premium_destination_blocked'; message: string };

/**
 * Checks a destination: E.164 (`destination_invalid`), a country of the allow-list
 * (`destination_not_allowed`), not a premium range (`premium_destination_blocked`). A JP
 * number written with its trunk zero (`+81080…`) is normalized to `+8180…`.
 */
export function checkDestination(raw: string): DestinationCheck {
  if (!E164.test(raw)) return { ok: false, reason: 'destination_invalid', message: 'The destination must be an E.164 number such as +14155550123' };
  let number = raw;
  if (number.startsWith('+810')) number = `+81${number.slice(4)}`;
  if (number.startsWith('+81')) {
    if (number.length < 11) return { ok: false, reason: 'destination_invalid', message: 'The destination is not a valid Japanese number' };
    if (JP_PREMIUM.test(number)) return { ok: false, reason: 'premium_destination_blocked', message: 'Premium-rate destinations (JP 0570, 0990) cannot be called' };
    return { ok: true, number, country: 'JP' };
  }
  if (number.startsWith('+1')) {
    if (number.length !== 12) return { ok: false, reason: 'destination_invalid', message: 'The destination is not a valid North American number' };
    // Canadian area codes; every other NANP number is treated as US.
    const area = number.slice(2, 5);
    return { ok: true, number, country: CA_AREAS.has(area) ? 'CA' : 'US' };
  }
  return { ok: false, reason: 'destination_not_allowed', message: `The destination must be in an allowed country: ${ALLOWED_DESTINATIONS_TEXT}` };
}

const CA_AREAS = new Set([
  '204', '226', '236', '249', '250', '263', '289', '306', '343', '354', '365', '367', '368', '382', '403', '416', '418', '428', '431', '437', '438', '450',
  '468', '474', '506', '514', '519', '548', '579', '581', '584', '587', '604', '613', '639', '647', '672', '683', '705', '709', '742', '753', '778', '780',
  '782', '807', '819', '825', '867', '873', '879', '902', '905',
]);

/** The zone of a number's country when the country has exactly one (docs/api/sessions.md "Time zone"), else null. */
export function singleZoneOf(number: string | null | undefined): string | null {
  if (number && /^\+81/.test(number)) return 'Asia/Tokyo';
  return null;
}
