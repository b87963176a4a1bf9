import t from 'tap';
import { Metadata, status } from '@grpc/grpc-js';
import { fromGrpcError } from '../../src/inference/index.ts';

const grpcError = (code: status, details: string) => Object.assign(new Error(`${code} ${status[code]}: ${details}`), { code, details, metadata: new Metadata() });

t.test('one mapping from gRPC status to platform errors', async (t) => {
  const cases: [status, string, number, string, string][] = [
    [status.UNAVAILABLE, 'No connection established. Last error: connect ECONNREFUSED 127.0.0.1:50051', 503, 'unavailable', 'Inference backend unavailable'],
    [status.UNAVAILABLE, 'openai provider at api.openai.com is not answering', 503, 'unavailable', 'Inference backend unavailable: openai provider at api.openai.com is not answering'],
    [status.RESOURCE_EXHAUSTED, 'backend at its concurrency limit', 503, 'unavailable', 'Inference backend busy'],
    [status.FAILED_PRECONDITION, 'provider X refused: quota exceeded', 502, 'upstream', 'Upstream refused the request: provider X refused: quota exceeded'],
    [status.INVALID_ARGUMENT, 'text: must not be empty', 422, 'invalid', 'must not be empty'],
    [status.INVALID_ARGUMENT, 'the request makes no sense', 400, 'bad_request', 'the request makes no sense'],
    [status.NOT_FOUND, 'Reference not found', 400, 'bad_request', 'Reference not found'],
    [status.UNIMPLEMENTED, 'unknown method', 400, 'bad_request', 'Not supported by the inference backend'],
    [status.UNIMPLEMENTED, 'The server does not implement the method /inference.v1.InferenceService/Generate', 400, 'bad_request', 'Not supported by the inference backend'],
    [status.UNIMPLEMENTED, 'audio is not synthetic speech: recognizing real speech needs a speech-to-text provider (set PARLEY_STT_PROVIDER)', 400, 'bad_request', 'Not supported by the inference backend: audio is not synthetic speech: recognizing real speech needs a speech-to-text provider (set PARLEY_STT_PROVIDER)'],
    [status.DEADLINE_EXCEEDED, 'Deadline exceeded', 504, 'timeout', 'Inference backend timed out'],
    [status.CANCELLED, 'Cancelled on server', 502, 'upstream', 'Inference backend cancelled the call'],
    [status.INTERNAL, 'Received RST_STREAM with code 2', 502, 'upstream', 'Inference backend error'],
  ];
  for (const [code, details, httpStatus, errCode, message] of cases) {
    const e = fromGrpcError(grpcError(code, details));
    t.same({ status: e.status, code: e.code, message: e.message }, { status: httpStatus, code: errCode, message }, status[code]);
  }
  const inv = fromGrpcError(grpcError(status.INVALID_ARGUMENT, 'prosody.speed: must be between 0.5 and 2'));
  t.same(inv.fields, [{ type: 'value_error', loc: ['body', 'prosody', 'speed'], msg: 'must be between 0.5 and 2', ctx: {} }], '422 names the field');
  t.equal(fromGrpcError(grpcError(status.RESOURCE_EXHAUSTED, '')).headers?.['Retry-After'], '1', 'busy says when to retry');
  const limited = grpcError(status.RESOURCE_EXHAUSTED, 'openai provider rate limit');
  limited.metadata.set('retry-after-ms', '2500');
  t.equal(fromGrpcError(limited).headers?.['Retry-After'], '3', 'a provider\'s retry delay (retry-after-ms) becomes Retry-After, rounded up to seconds');
});
