import t from 'tap';
import { ALLOWED_DESTINATIONS_TEXT, checkDestination, singleZoneOf } from '../../src/telephony/destinations.ts';

t.test('destinations: US, CA and JP only', async (t) => {
  t.match(checkDestination('+14155550123'), { ok: true, number: '+14155550123', country: 'US' });
  t.match(checkDestination('+14165550123'), { ok: true, country: 'CA' });
  t.match(checkDestination('+81312345678'), { ok: true, country: 'JP' });
  t.match(checkDestination('+442071838750'), { ok: false, reason: 'destination_not_allowed' });
  t.match(checkDestination('+33123456789'), { ok: false, reason: 'destination_not_allowed' });
  t.equal(ALLOWED_DESTINATIONS_TEXT, 'US (+1), CA (+1), JP (+81)');
});

t.test('destinations: E.164 or destination_invalid', async (t) => {
  for (const bad of ['4155550123', '+0123', '+1415555012', 'tel:+14155550123', ''])
    t.match(checkDestination(bad), { ok: false, reason: 'destination_invalid' }, bad);
});

t.test('a JP trunk zero is normalized: +81080… → +8180…', async (t) => {
  t.match(checkDestination('+810801234567'), { ok: true, number: '+81801234567', country: 'JP' });
});

t.test('JP premium-rate 0570 and 0990 are blocked, with or without the trunk zero', async (t) => {
  for (const n of ['+81570123456', '+810570123456', '+819901234567'])
    t.match(checkDestination(n), { ok: false, reason: 'premium_destination_blocked' }, n);
});

t.test('single-zone countries give the call its zone', async (t) => {
  t.equal(singleZoneOf('+81312345678'), 'Asia/Tokyo');
  t.equal(singleZoneOf('+14155550123'), null, 'US has several zones');
  t.equal(singleZoneOf(null), null);
});
