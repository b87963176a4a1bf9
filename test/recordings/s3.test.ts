// SigV4 for S3-compatible recording storage: AWS's published examples, and a local store that
// verifies every signature on its own.
import t from 'tap';
import { presignUrl, S3Client, signHeaders } from '../../src/recordings/index.ts';
import { startS3Server } from '../fixtures/s3-server.ts';

const EXAMPLE = { accessKeyId: 'AKIAIOSFODNN7EXAMPLE', secretAccessKey: 'wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY', region: 'us-east-1', date: new Date('2013-05-24T00:00:00Z') };

t.test('signatures match the AWS Signature Version 4 examples for S3', async (t) => {
  const h = signHeaders({ ...EXAMPLE, method: 'GET', url: new URL('https://examplebucket.s3.amazonaws.com/test.txt'), headers: { range: 'bytes=0-9' }, payloadHash: 'e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855' });
  t.equal(h.Authorization, 'AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request, SignedHeaders=host;range;x-amz-content-sha256;x-amz-date, Signature=f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41', 'GET Object (header auth)');
  const url = new URL(presignUrl({ ...EXAMPLE, method: 'GET', url: new URL('https://examplebucket.s3.amazonaws.com/test.txt'), expiresS: 86400 }));
  t.equal(url.searchParams.get('X-Amz-Signature'), 'aeeed9bbccd4d02ee5c0109b86d86835f995330da4c265957d157751f604d404', 'presigned GET');
});

t.test('PUT, GET and presigned GET against a store that checks the signatures', async (t) => {
  const s3 = await startS3Server();
  t.teardown(() => s3.close());
  const config = { endpoint: s3.url, bucket: s3.bucket, region: s3.region, accessKeyId: s3.accessKeyId, secretAccessKey: s3.secretAccessKey, prefix: 'rec/' };
  const client = new S3Client(config);
  const body = Buffer.from('RIFF… a track with spaces & unicode é');
  await client.put('sess_1/agent track é.wav', body, 'audio/wav');
  t.same(s3.objects.get('rec/sess_1/agent track é.wav')?.body, body, 'stored under the prefixed key (segments URI-encoded)');
  t.same(Buffer.from((await client.get('sess_1/agent track é.wav'))!), body, 'signed GET');
  t.equal(await client.get('sess_1/missing.wav'), null, 'a missing object is null');
  const presigned = await fetch(client.presignGet('sess_1/agent track é.wav', 3600));
  t.equal(presigned.status, 200, 'a presigned URL works without credentials');
  t.same(Buffer.from(await presigned.arrayBuffer()), body);
  t.ok(s3.log.every((l) => l.verdict === 'ok'), 'every request verified');

  const wrong = new S3Client({ ...config, secretAccessKey: 'not the secret' });
  await t.rejects(wrong.put('x.wav', body, 'audio/wav'), { status: 403, message: 'S3 PUT answered 403' }, 'a wrong secret is refused');
  t.equal(s3.log.at(-1)?.verdict, 'signature mismatch');

  const past = new S3Client(config, () => new Date(Date.now() - 2 * 3600_000));
  const stale = await fetch(past.presignGet('sess_1/agent track é.wav', 3600));
  t.equal(stale.status, 403, 'an expired presigned URL is refused');
  t.equal(s3.log.at(-1)?.verdict, 'expired');

  const tampered = new URL(client.presignGet('sess_1/agent track é.wav', 3600));
  tampered.pathname = tampered.pathname.replace('agent', 'user');
  t.equal((await fetch(tampered)).status, 403, 'a presigned URL for one key does not open another');
});
