import t from 'tap';
import { SipCallError, type CreateSipDispatchRuleOptions, type CreateSipInboundTrunkOptions, type CreateSipParticipantOptions, type SipClient } from 'livekit-server-sdk';
import { createLogger } from '../../src/log.ts';
import { CarrierRefused } from '../../src/telephony/carrier.ts';
import {
  dialOutcomeOf, dialRequest, dispatchRuleRequest, inboundTrunkRequest, INBOUND_ROOM_PREFIX, LivekitSipCarrier, livekitSipFromEnv, transferRequest,
} from '../../src/telephony/livekit-sip.ts';

const cfg = { url: 'https://lk.example', apiKey: 'key', apiSecret: 'secret', outboundTrunkId: 'ST_out' };

t.test('inbound: a trunk for the number and a dispatch rule giving each call its own room', async (t) => {
  const trunk = inboundTrunkRequest('+14155550101');
  // Typed against the SDK: these are the arguments SipClient takes.
  const args: Parameters<SipClient['createSipInboundTrunk']> = [trunk.name, trunk.numbers, trunk.opts satisfies CreateSipInboundTrunkOptions];
  t.same(args[1], ['+14155550101']);
  t.same(JSON.parse(trunk.opts.metadata!), { phone_number: '+14155550101' });
  const rule = dispatchRuleRequest('+14155550101', 'ST_in');
  const ruleArgs: Parameters<SipClient['createSipDispatchRule']> = [rule.rule, rule.opts satisfies CreateSipDispatchRuleOptions];
  t.same(ruleArgs[0], { type: 'individual', roomPrefix: INBOUND_ROOM_PREFIX });
  t.same(rule.opts.trunkIds, ['ST_in']);
  t.equal(rule.opts.attributes!['parley.dialed_number'], '+14155550101');
});

t.test('outbound: a SIP participant through the outbound trunk into the session room, ringing at most the ring timeout', async (t) => {
  const r = dialRequest(cfg, { from: '+14155550101', to: '+13125550142', ringTimeoutMs: 30_000, sessionId: 'sess_1' });
  const args: Parameters<SipClient['createSipParticipant']> = [r.trunkId, r.number, r.room, r.opts satisfies CreateSipParticipantOptions];
  t.same(args.slice(0, 3), ['ST_out', '+13125550142', 'parley-sess_1']);
  t.match(r.opts, { fromNumber: '+14155550101', participantIdentity: 'caller-sess_1', ringingTimeout: 30, waitUntilAnswered: true });
  const consult = dialRequest(cfg, { from: '+14155550101', to: '+13125550199', ringTimeoutMs: 30_000, sessionId: 'sess_1', consultFor: 'call' });
  t.equal(consult.room, 'parley-sess_1-consult', 'a warm transfer consult leg rings in a private room');
  t.equal(consult.opts.participantIdentity, 'consult-sess_1');
  t.throws(() => dialRequest({ ...cfg, outboundTrunkId: null }, { from: '+1', to: '+1', ringTimeoutMs: 1000, sessionId: 's' }), CarrierRefused, 'no outbound trunk: the dial is refused');
});

t.test('cold transfer: SIP REFER to tel:<destination>', async (t) => {
  const r = transferRequest('parley-sess_1', 'caller-sess_1', '+13125550199', 30_000);
  const args: Parameters<SipClient['transferSipParticipant']> = [r.room, r.identity, r.transferTo, r.opts];
  t.same(args.slice(0, 3), ['parley-sess_1', 'caller-sess_1', 'tel:+13125550199']);
  t.equal(r.opts.ringingTimeout, 30);
});

t.test('dial outcomes from SIP status codes', async (t) => {
  const sip = (code: number) => new SipCallError('twirp', 'call failed', 400, 'failed_precondition', { sip_status_code: String(code) });
  t.equal(dialOutcomeOf(sip(486)), 'busy');
  t.equal(dialOutcomeOf(sip(603)), 'busy');
  t.equal(dialOutcomeOf(sip(480)), 'no_answer');
  t.equal(dialOutcomeOf(sip(408)), 'no_answer');
  t.equal(dialOutcomeOf(sip(500)), 'failed');
  t.equal(dialOutcomeOf(new Error('x')), 'failed');
});

t.test('settings: the outbound trunk comes from LIVEKIT_SIP_OUTBOUND_TRUNK_ID', async (t) => {
  t.equal(livekitSipFromEnv({ LIVEKIT_SIP_OUTBOUND_TRUNK_ID: ' ST_x ' }, cfg).outboundTrunkId, 'ST_x');
  t.equal(livekitSipFromEnv({}, cfg).outboundTrunkId, null);
  const c = new LivekitSipCarrier(cfg, createLogger({ level: 'silent' }));
  t.equal(c.provider, 'managed');
  t.same(await c.search(), [], 'no inventory: numbers come from the SIP provider behind LiveKit');
  await t.rejects(c.calls.hold('x', true), CarrierRefused, 'hold (warm transfers) is not supported yet');
});

t.test('against a LiveKit server (LIVEKIT_URL set): register and release a number', { skip: !process.env.LIVEKIT_URL && 'LIVEKIT_URL is not set' }, async (t) => {
  const c = new LivekitSipCarrier(livekitSipFromEnv(process.env, { url: process.env.LIVEKIT_URL!, apiKey: process.env.LIVEKIT_API_KEY ?? '', apiSecret: process.env.LIVEKIT_API_SECRET ?? '' }), createLogger({ level: 'silent' }));
  const { carrierRef } = await c.purchase('+14155550177');
  t.match(carrierRef, /^.+\/.+$/, 'trunk id / dispatch rule id');
  const [trunkId] = carrierRef.split('/');
  t.ok((await c.sip.listSipInboundTrunk()).some((x) => x.sipTrunkId === trunkId));
  await c.release('+14155550177', carrierRef);
  t.notOk((await c.sip.listSipInboundTrunk()).some((x) => x.sipTrunkId === trunkId), 'released');
});
