/** The platform's side of the inference contract: client, routing, errors, the grpc-js adapter. */
export { createInferenceClient, type InferenceClient, type InferenceConfig } from './client.ts';
export {
  Backend,
  type BackendHealth,
  type BackendOptions,
  type SendBacklog,
  type CallOptions,
  type GenerateInput,
  type SynthesisSession,
  type SynthesizeInput,
  type TranscribeConfigInput,
  type TranscriptionSession,
} from './backend.ts';
export { fromGrpcError } from './errors.ts';
export {
  CHAT_MODEL_IDS,
  DEFAULT_MODEL,
  defaultRoutes,
  parseInferenceBackends,
  resolveModelId,
  SPEECH_MODEL_IDS,
  TRANSCRIPTION_MODEL_IDS,
  type ModelKind,
  type Route,
} from './routing.ts';
export { createGrpcClient, inferenceServiceDefinition, paths, type InferenceGrpcClient, type InferenceServiceHandlers } from './grpc-service.ts';
export { spawnNativeBackend, type NativeProcess, type NativeProcessEvent, type NativeProcessOptions } from './native-process.ts';
export * as pb from '../gen/inference/v1/inference_pb.ts';
