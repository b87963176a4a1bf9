import { createSecretBox, loadMasterKey } from '../crypto/secrets.ts';
import { defineModule } from '../modules.ts';
import { bootstrap } from './bootstrap.ts';
import { KeyVerifier } from './keys.ts';

/**
 * API keys and secrets: the secret box (secrets at rest), the key verifier every
 * authenticated route and socket asks (`authenticate`), and the bootstrap team and key.
 */
export const authModule = defineModule({
  name: 'auth',
  needs: ['config', 'db', 'sql', 'state'],
  async start({ config, db, sql, state }, onClose) {
    const box = createSecretBox(loadMasterKey({ envKey: config.secretKey, dataDir: config.dataDir }));
    const verifier = new KeyVerifier(sql, config.authCacheMs);
    onClose(await verifier.listen(state));
    const boot = await bootstrap(sql, { key: config.bootstrapKey, creditMicros: config.bootstrapCreditMicros, shared: db.kind === 'postgres' });
    return { box, verifier, authenticate: verifier.verify.bind(verifier), teamId: boot.teamId, bootstrapKey: boot.key };
  },
});
