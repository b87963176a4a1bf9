import t from 'tap';
import { localDate, localTime, promptVariables, renderTemplate, resolveTimezone, splitSecretVariables, systemVariables, worldContext } from '../../src/sessions/variables.ts';

t.test('renderTemplate: {{name}} and {{system.name}}; unmatched placeholders stay literal', async (t) => {
  const vars = { customer: 'Ada', visits: 3, vip: true, 'system.timezone': 'Europe/Paris' };
  t.equal(renderTemplate('Hi {{customer}}, visit {{visits}} (vip: {{vip}}) in {{system.timezone}}.', vars), 'Hi Ada, visit 3 (vip: true) in Europe/Paris.');
  t.equal(renderTemplate('Hi {{ customer }}!', vars), 'Hi Ada!', 'spaces inside the braces');
  t.equal(renderTemplate('Hi {{unknown}} {{system.today}} {{}} {{ }} {customer}', vars), 'Hi {{unknown}} {{system.today}} {{}} {{ }} {customer}');
  t.equal(renderTemplate('{{a}}', { a: '{{b}}', b: 'no' }), '{{b}}', 'substituted text is not rendered again');
  t.equal(renderTemplate('{{toString}} {{constructor}}', {}), '{{toString}} {{constructor}}', 'only own values');
  t.equal(renderTemplate('no placeholders', vars), 'no placeholders');
});

t.test('systemVariables: the six reserved names; numbers only when E.164', async (t) => {
  const v = systemVariables({ channel: 'web_voice', timezone: 'Asia/Tokyo', now: new Date('2026-03-01T16:30:00Z'), language: 'ja' });
  t.same(v, {
    'system.channel': 'web_voice',
    'system.timezone': 'Asia/Tokyo',
    'system.today': '2026-03-02',
    'system.language': 'ja',
    'system.caller_number': '',
    'system.dialed_number': '',
  });
  const phone = systemVariables({ channel: 'phone_inbound', timezone: 'UTC', today: '2026-01-01', language: 'en', callerNumber: '+14155550100', dialedNumber: 'anonymous' });
  t.equal(phone['system.caller_number'], '+14155550100');
  t.equal(phone['system.dialed_number'], '', 'invalid or withheld → ""');
  t.equal(phone['system.today'], '2026-01-01');
});

t.test('resolveTimezone: request, then agent, then a valid client zone, then phone, then UTC', async (t) => {
  t.equal(resolveTimezone({ request: 'Europe/Paris', agent: 'Asia/Tokyo', client: 'America/Chicago' }), 'Europe/Paris');
  t.equal(resolveTimezone({ agent: 'Asia/Tokyo', client: 'America/Chicago' }), 'Asia/Tokyo');
  t.equal(resolveTimezone({ agent: '', client: 'America/Chicago' }), 'America/Chicago');
  t.equal(resolveTimezone({ client: 'Mars/Base' }), 'UTC', 'an invalid client zone is ignored');
  t.equal(resolveTimezone({ client: 'Mars/Base', phone: 'Europe/Berlin' }), 'Europe/Berlin');
  t.equal(resolveTimezone({}), 'UTC');
});

t.test('secret__ variables never reach the model', async (t) => {
  const vars = { a: 1, secret__key: 'k' };
  t.same(promptVariables(vars), { a: 1 });
  t.same(splitSecretVariables(vars), { plain: { a: 1 }, secret: { secret__key: 'k' } });
});

t.test('world context: date and zone at start, local time to the minute per turn', async (t) => {
  const at = new Date('2026-07-04T23:05:30Z');
  t.equal(localDate(at, 'America/New_York'), '2026-07-04');
  t.equal(worldContext('start', at, 'Asia/Tokyo'), 'Current date: 2026-07-05. Time zone: Asia/Tokyo.');
  t.equal(worldContext('turn', at, 'Europe/London'), 'Current local time: 00:05 (Europe/London).');
  // Asked again within and across a minute, a day and a zone (the values are remembered per minute).
  t.equal(worldContext('turn', new Date('2026-07-04T23:05:59.999Z'), 'Europe/London'), 'Current local time: 00:05 (Europe/London).');
  t.equal(worldContext('turn', new Date('2026-07-04T23:06:00Z'), 'Europe/London'), 'Current local time: 00:06 (Europe/London).');
  t.equal(worldContext('turn', new Date('2026-07-04T23:06:00Z'), 'Asia/Kolkata'), 'Current local time: 04:36 (Asia/Kolkata).');
  t.equal(localDate(new Date('2026-07-04T23:59:59.999Z'), 'UTC'), '2026-07-04');
  t.equal(localDate(new Date('2026-07-05T00:00:00Z'), 'UTC'), '2026-07-05');
  t.equal(localDate(new Date('2026-07-04T23:59:59.999Z'), 'UTC'), '2026-07-04', 'an earlier minute again');
  t.throws(() => localDate(new Date(Number.NaN), 'UTC'), RangeError, 'an invalid date still throws');
  t.throws(() => localTime(at, 'Mars/Olympus'), RangeError, 'an unknown zone still throws');
});
