/** Read with the rest of the configuration (src/config.ts). */
export { nodeAt, nodeIdentity } from '../config.ts';
