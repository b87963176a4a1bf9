export * from './schema.ts';
export * from './defaults.ts';
export * from './merge.ts';
export * from './hash.ts';
export * from './service.ts';
