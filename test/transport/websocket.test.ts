import t from 'tap';
import { parseClientEvent } from '../../src/transport/websocket.ts';

t.test('client events: the wire-protocol types, malformed and unknown ones ignored', async (t) => {
  t.same(parseClientEvent('{"topic":"client-event","type":"user.message","text":"hi"}'), { type: 'user.message', text: 'hi' });
  t.same(parseClientEvent('{"type":"user.message","text":"hi","audio":false}'), { type: 'user.message', text: 'hi', audio: false });
  t.same(parseClientEvent('{"type":"user.message","text":"hi","audio":true}'), { type: 'user.message', text: 'hi' });
  t.same(parseClientEvent('{"type":"user.activity"}'), { type: 'user.activity' });
  t.same(parseClientEvent('{"type":"user.interrupt"}'), { type: 'user.interrupt' });
  t.same(parseClientEvent('{"type":"user.hangup"}'), { type: 'user.hangup' });
  t.same(parseClientEvent('{"type":"client_tool.result","callId":"c1","result":1}'), { type: 'client_tool.result', callId: 'c1', result: 1 }, 'matched to its call by the session (unknown ids ignored there)');
  t.same(parseClientEvent('{"type":"client_tool.result","callId":"c1","isError":true}'), { type: 'client_tool.result', callId: 'c1', isError: true });
  t.equal(parseClientEvent('{"type":"client_tool.result","result":1}'), null, 'a result needs its callId');
  t.equal(parseClientEvent('not json'), null);
  t.equal(parseClientEvent('[1,2]'), null);
  t.equal(parseClientEvent('{"type":"user.dance"}'), null);
  t.equal(parseClientEvent('{"type":"user.message"}'), null, 'a message needs text');
  t.equal(parseClientEvent('{"type":"user.message","text":"  "}'), null);
});
