import t from 'tap';
import { createSharedState } from '../../src/state/index.ts';
import { sharedStateContract } from './contract.ts';

sharedStateContract(t, {
  kind: 'memory',
  shared: false,
  realTimeExpiry: false,
  make: (options) => createSharedState(options),
});
