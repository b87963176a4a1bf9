import t from 'tap';
import { ServiceError } from '../../src/errors.ts';
import { CarrierRefused, Carriers, SandboxCarrier } from '../../src/telephony/index.ts';

const search = { countryCode: 'US' as const, numberType: 'local' as const, limit: 100 };

t.test('the inventory is deterministic and filtered by country and area code', async (t) => {
  const a = new SandboxCarrier();
  const b = new SandboxCarrier();
  t.same(await a.search(search), await b.search(search), 'two carriers offer the same numbers');
  const us = await a.search(search);
  t.equal(us.length, 100);
  t.ok(us.every((n) => /^\+1\d{3}55501\d{2}$/.test(n.phoneNumber) && n.countryCode === 'US' && n.numberType === 'local'));
  const toronto = await a.search({ ...search, countryCode: 'CA', areaCode: '416', limit: 3 });
  t.same(toronto.map((n) => n.phoneNumber), ['+14165550100', '+14165550101', '+14165550102']);
  t.match(toronto[0], { region: 'ON', locality: 'Toronto' });
  t.same(await a.search({ ...search, areaCode: '999' }), []);
  t.ok(SandboxCarrier.inInventory('+14155550149'));
  t.notOk(SandboxCarrier.inInventory('+14155550150'));
  t.notOk(SandboxCarrier.inInventory('+19995550100'));
});

t.test('purchase holds a number until release; releasing twice is fine', async (t) => {
  const c = new SandboxCarrier();
  const { carrierRef } = await c.purchase('+14155550100');
  t.match(carrierRef, /^sbx_\d+$/);
  t.ok(c.holds('+14155550100'));
  t.notOk((await c.search({ ...search, areaCode: '415', limit: 1 })).some((n) => n.phoneNumber === '+14155550100'), 'a held number is not offered');
  await t.rejects(c.purchase('+14155550100'), new CarrierRefused('number is already rented'));
  await t.rejects(c.purchase('+14155559999'), new CarrierRefused('number is not in the sandbox inventory'));
  await c.release('+14155550100');
  await c.release('+14155550100');
  t.notOk(c.holds('+14155550100'));
});

t.test('failure switches make the next operations fail, in order, then clear', async (t) => {
  const c = new SandboxCarrier();
  c.failNext('purchase', 'first');
  c.failNext('purchase', 'second');
  await t.rejects(c.purchase('+14155550100'), { name: 'CarrierRefused', detail: 'first' });
  await t.rejects(c.purchase('+14155550100'), { name: 'CarrierRefused', detail: 'second' });
  t.notOk(c.holds('+14155550100'));
  await c.purchase('+14155550100');
  c.failNext('release', 'down', 2);
  await t.rejects(c.release('+14155550100'), { name: 'CarrierRefused', detail: 'down' });
  await t.rejects(c.release('+14155550100'), { name: 'CarrierRefused', detail: 'down' });
  t.ok(c.holds('+14155550100'), 'a failed release keeps the number');
  await c.release('+14155550100');
  t.notOk(c.holds('+14155550100'));
});

t.test('Carriers: a provider without a carrier is a 400', async (t) => {
  const carriers = new Carriers([new SandboxCarrier()]);
  t.equal(carriers.defaultProvider, 'sandbox');
  t.same(carriers.providers(), ['sandbox']);
  t.equal(carriers.get('sandbox').provider, 'sandbox');
  const err = t.throws(() => carriers.get('sip')) as ServiceError;
  t.equal(err.status, 400);
  t.equal(err.message, 'Phone number provider is not configured: sip');
});
