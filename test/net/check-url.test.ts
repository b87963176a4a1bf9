import t from 'tap';
import { checkUrl, parseAllowList } from '../../src/net/index.ts';

// Each row: a name, the URL as a user would write it, and what the check must say.
const accepted: [string, string][] = [
  ['https public name with path', 'https://example.com/x'],
  ['http public IPv4 with port', 'http://93.184.216.34:8080/'],
  ['public name with query and fragment', 'https://api.example.com/v1/hook?a=1#frag'],
  ['public name with a trailing dot', 'https://example.com./x'],
  ['upper-case scheme and host', 'HTTPS://EXAMPLE.COM/'],
  ['public IPv6 literal', 'http://[2606:2800:220:1:248:1893:25c8:1946]/'],
  ['IPv4-mapped form of a public IPv4', 'http://[::ffff:93.184.216.34]/'],
  ['6to4 form of a public IPv4', 'http://[2002:5db8:d822::1]/'],
  ['NAT64 form of a public IPv4', 'http://[64:ff9b::93.184.216.34]/'],
  ['name that only resembles localhost', 'https://localhost-tools.example.com/'],
  ['name that resolves to loopback (the connect-time guard refuses it)', 'http://127.0.0.1.nip.io/'],
  ['fragment holding an @ is not a credential', 'http://example.com/#@127.0.0.1'],
  ['public address next to CGNAT', 'http://100.128.0.1/'],
  ['public address next to 172.16/12', 'http://172.32.0.1/'],
];

const rejected: [string, string, RegExp][] = [
  ['ftp scheme', 'ftp://example.com/', /scheme/],
  ['file scheme', 'file:///etc/passwd', /scheme/],
  ['javascript scheme', 'javascript:alert(1)', /scheme/],
  ['gopher scheme', 'gopher://example.com/', /scheme/],
  ['not a URL', 'example.com/x', /not valid/],
  ['invalid IPv4 with five parts', 'http://1.2.3.4.5/', /not valid/],
  ['user in authority', 'https://user@example.com/', /credentials/],
  ['user and password in authority', 'https://user:pass@example.com/', /credentials/],
  ['password only', 'https://:secret@example.com/', /credentials/],
  ['localhost', 'http://localhost/', /localhost/],
  ['localhost with port', 'http://localhost:8080/x', /localhost/],
  ['upper-case localhost', 'http://LOCALHOST/', /localhost/],
  ['localhost with trailing dot', 'http://localhost./', /localhost/],
  ['localhost with two trailing dots', 'http://localhost../', /localhost/],
  ['sub-domain of localhost', 'http://api.localhost/', /localhost/],
  ['localhost.localdomain', 'http://localhost.localdomain/', /localhost/],
  ['ip6-localhost', 'http://ip6-localhost/', /localhost/],
  ['ip6-loopback', 'http://ip6-loopback/', /localhost/],
  ['GCP metadata name', 'http://metadata.google.internal/computeMetadata/v1/', /metadata/],
  ['GCP metadata name with trailing dot', 'http://metadata.google.internal./', /metadata/],
  ['bare metadata name', 'http://metadata/', /metadata/],
  ['AWS instance-data name', 'http://instance-data/latest/', /metadata/],
  ['AWS instance-data FQDN', 'http://instance-data.ec2.internal/', /metadata/],
  ['.internal domain', 'http://db.corp.internal/', /private-use/],
  ['.local mDNS domain', 'http://printer.local/', /private-use/],
  ['.home.arpa domain', 'http://nas.home.arpa/', /private-use/],
  ['IPv4 loopback', 'http://127.0.0.1/', /loopback/],
  ['IPv4 loopback elsewhere in 127/8', 'http://127.8.9.10:3000/', /loopback/],
  ['IPv4 loopback with trailing dot', 'http://127.0.0.1./', /loopback/],
  ['decimal loopback', 'http://2130706433/', /loopback/],
  ['octal loopback', 'http://0177.0.0.1/', /loopback/],
  ['octal loopback with many zeros', 'http://00000177.0.0.1/', /loopback/],
  ['hex-octet loopback', 'http://0x7f.0.0.1/', /loopback/],
  ['hex loopback as one number', 'http://0x7f000001/', /loopback/],
  ['short loopback 127.1', 'http://127.1/', /loopback/],
  ['short hex loopback 0x7f.1', 'http://0x7f.1/', /loopback/],
  ['percent-encoded loopback', 'http://127.0.0.%31/', /loopback/],
  ['full-width digits loopback', 'http://１２７.０.０.１/', /loopback/],
  ['backslash turns userinfo into path', 'http://127.0.0.1\\@example.com/', /loopback/],
  ['private 10/8', 'http://10.0.0.5/', /private/],
  ['private 172.16/12', 'http://172.16.0.1/', /private/],
  ['private 172.16/12 upper end', 'http://172.31.255.254/', /private/],
  ['private 192.168/16', 'http://192.168.1.1/', /private/],
  ['decimal private 10.0.0.1', 'http://167772161/', /private/],
  ['link-local', 'http://169.254.1.1/', /link-local/],
  ['AWS/GCP/Azure metadata IPv4', 'http://169.254.169.254/latest/meta-data/', /metadata/],
  ['metadata IPv4 in decimal', 'http://2852039166/', /metadata/],
  ['metadata IPv4 in hex', 'http://0xa9fea9fe/', /metadata/],
  ['Alibaba metadata 100.100.100.200', 'http://100.100.100.200/', /metadata/],
  ['AWS IPv6 metadata fd00:ec2::254', 'http://[fd00:ec2::254]/', /metadata/],
  ['carrier-grade NAT', 'http://100.64.0.1/', /carrier-grade NAT/],
  ['unspecified 0.0.0.0', 'http://0.0.0.0/', /unspecified/],
  ['unspecified written as 0', 'http://0/', /unspecified/],
  ['unspecified 0/8 other address', 'http://0.1.2.3/', /unspecified/],
  ['IPv4 multicast', 'http://224.0.0.1/', /multicast/],
  ['IPv4 broadcast', 'http://255.255.255.255/', /broadcast/],
  ['IPv4 reserved 240/4', 'http://240.0.0.1/', /reserved/],
  ['IPv4 documentation range', 'http://192.0.2.1/', /reserved/],
  ['IPv6 loopback', 'http://[::1]/', /loopback/],
  ['IPv6 loopback written in full', 'http://[0:0:0:0:0:0:0:1]/', /loopback/],
  ['IPv6 unspecified', 'http://[::]/', /unspecified/],
  ['IPv6 link-local', 'http://[fe80::1]/', /link-local/],
  ['IPv6 unique-local', 'http://[fc00::1]/', /unique-local/],
  ['IPv6 unique-local fd', 'http://[fd12:3456::1]/', /unique-local/],
  ['IPv6 multicast', 'http://[ff02::1]/', /multicast/],
  ['IPv6 site-local (deprecated)', 'http://[fec0::1]/', /site-local/],
  ['IPv6 documentation range', 'http://[2001:db8::1]/', /reserved/],
  ['IPv4-mapped loopback dotted', 'http://[::ffff:127.0.0.1]/', /loopback IPv4 embedded/],
  ['IPv4-mapped loopback hex', 'http://[::ffff:7f00:1]/', /loopback IPv4 embedded/],
  ['IPv4-mapped metadata', 'http://[::ffff:169.254.169.254]/', /metadata IPv4 embedded/],
  ['IPv4-mapped private', 'http://[::ffff:10.0.0.1]/', /private IPv4 embedded/],
  ['IPv4-translated (RFC 6145) metadata', 'http://[::ffff:0:a9fe:a9fe]/', /metadata IPv4 embedded/],
  ['IPv4-compatible loopback', 'http://[::127.0.0.1]/', /reserved/],
  ['NAT64 embedding loopback', 'http://[64:ff9b::127.0.0.1]/', /loopback IPv4 embedded/],
  ['NAT64 embedding private', 'http://[64:ff9b::10.0.0.1]/', /private IPv4 embedded/],
  ['6to4 embedding loopback', 'http://[2002:7f00:1::]/', /loopback IPv4 embedded/],
  ['6to4 embedding private 192.168.0.1', 'http://[2002:c0a8:1::1]/', /private IPv4 embedded/],
  ['Teredo', 'http://[2001:0:4136:e378:8000:63bf:3fff:fdd2]/', /teredo/],
];

t.test('accepted URL forms', async (t) => {
  for (const [name, url] of accepted) {
    const r = checkUrl(url, { allow: [] });
    t.ok(r.ok, name, { url, reason: r.ok ? undefined : r.reason });
  }
});

t.test('rejected URL forms', async (t) => {
  for (const [name, url, why] of rejected) {
    const r = checkUrl(url, { allow: [] });
    t.equal(r.ok, false, `${name} is rejected`, { url });
    if (!r.ok) t.match(r.reason, why, `${name}: reason names why`);
  }
});

t.test('the WHATWG parser normalises numeric host spellings to dotted quads', async (t) => {
  for (const raw of ['2130706433', '0177.0.0.1', '0x7f.0.0.1', '0x7f000001', '127.1', '127.0.0.%31', '１２７.０.０.１', '127.0.0.1.']) {
    t.equal(new URL(`http://${raw}/`).hostname, '127.0.0.1', raw);
  }
  t.equal(new URL('http://[::ffff:127.0.0.1]/').hostname, '[::ffff:7f00:1]');
  t.equal(new URL('http://[0:0:0:0:0:0:0:1]/').hostname, '[::1]');
});

t.test('a reason never echoes the URL', async (t) => {
  const r = checkUrl('http://secret-token.localhost/', { allow: [] });
  t.equal(r.ok, false);
  if (!r.ok) t.notMatch(r.reason, /secret-token/);
});

t.test('failure kind separates invalid URLs from blocked destinations', async (t) => {
  const invalid = checkUrl('ftp://example.com/', { allow: [] });
  const blocked = checkUrl('http://10.0.0.1/', { allow: [] });
  t.match(invalid, { ok: false, kind: 'invalid' });
  t.match(blocked, { ok: false, kind: 'blocked' });
});

t.test('allow-list opens an exact host:port only', async (t) => {
  const allow = parseAllowList('127.0.0.1:8080, LOCALHOST:3000,[::1]:9000');
  t.same(allow, ['127.0.0.1:8080', 'localhost:3000', '[::1]:9000']);
  t.ok(checkUrl('http://127.0.0.1:8080/x', { allow }).ok, 'listed address and port');
  t.ok(checkUrl('http://localhost:3000/', { allow }).ok, 'listed name and port');
  t.ok(checkUrl('http://[::1]:9000/', { allow }).ok, 'listed IPv6 and port');
  t.notOk(checkUrl('http://127.0.0.1:8081/', { allow }).ok, 'other port');
  t.notOk(checkUrl('http://127.0.0.1/', { allow }).ok, 'default port is port 80, not listed');
  t.notOk(checkUrl('http://127.0.0.2:8080/', { allow }).ok, 'other loopback address');
  t.notOk(checkUrl('http://[::ffff:127.0.0.1]:8080/', { allow }).ok, 'mapped spelling is another host');
  t.notOk(checkUrl('http://user@127.0.0.1:8080/', { allow }).ok, 'credentials stay rejected');
  t.notOk(checkUrl('ftp://127.0.0.1:8080/', { allow }).ok, 'scheme stays restricted');
});

t.test('allow-list parsing', async (t) => {
  t.same(parseAllowList(undefined), [], 'off when unset');
  t.same(parseAllowList(''), [], 'off when empty');
  t.same(parseAllowList('127.0.0.1, 10.0.0.1:0, host:99999, :80, 127.0.0.1:80'), ['127.0.0.1:80'], 'entries without a valid port are ignored');
  t.same(parseAllowList('127.0.0.1:0080'), ['127.0.0.1:80'], 'port normalised');
});

t.test('allow-list defaults to PARLEY_OUTBOUND_ALLOW', async (t) => {
  const saved = process.env.PARLEY_OUTBOUND_ALLOW;
  t.teardown(() => {
    if (saved === undefined) delete process.env.PARLEY_OUTBOUND_ALLOW;
    else process.env.PARLEY_OUTBOUND_ALLOW = saved;
  });
  delete process.env.PARLEY_OUTBOUND_ALLOW;
  t.notOk(checkUrl('http://127.0.0.1:7000/').ok, 'off by default');
  process.env.PARLEY_OUTBOUND_ALLOW = '127.0.0.1:7000';
  t.ok(checkUrl('http://127.0.0.1:7000/').ok, 'on when set');
});
