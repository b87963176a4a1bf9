// The console's stylesheet is bundled by esbuild (scripts/build.mjs); TypeScript only needs to know the import exists.
declare module '*.css';
