/**
 * The embeddable widget's display configuration (`GET /v1/agent/agents/{agent_id}/widget`,
 * docs/widget.md): served without a key for public agents only, behind the same gate as
 * keyless session creation (`publicGate`: the public switch, then `Origin` against the
 * allow-list, with the same 403 messages). Fields are only ever added, never renamed; the
 * embed tag's attributes override each of them.
 */
import { z } from 'zod';
import { notFound } from '../errors.ts';
import type { Sql } from '../store/db.ts';
import { getSessionForCreation } from '../sessions/store.ts';
import { PUBLIC_OVERRIDE_FIELDS, publicGate } from '../sessions/service.ts';

export const widgetConfig = z.object({
  agent_name: z.string().meta({ description: "The agent's name, shown on the launcher and the call card" }),
  language: z.string().nullable().meta({ description: "The published version's speaking language (the card's lang), null before the first publish" }),
  available: z.boolean().meta({ description: 'Whether a session can start now: the agent is active and has a published version (else creation answers 409)' }),
  overrides_allowed: z.array(z.string()).meta({ description: 'The session overrides a visitor may send (language, voice_id): those the agent allows that public sessions take' }),
});
export type WidgetConfig = z.output<typeof widgetConfig>;

export class WidgetConfigService {
  constructor(private readonly sql: Sql) {}

  /** 404 for an unknown agent; 403 from the keyless gate; else the display fields. */
  async get(agentId: string, origin: string | undefined): Promise<WidgetConfig> {
    const agent = await getSessionForCreation(this.sql, agentId, undefined);
    if (!agent) throw notFound('Agent');
    publicGate(agent, origin);
    return {
      agent_name: agent.name,
      language: agent.config?.voice.speaking_language ?? null,
      available: agent.status === 'active' && agent.version_number !== null,
      overrides_allowed: agent.overrides_allowed.filter((o) => PUBLIC_OVERRIDE_FIELDS.includes(o)),
    };
  }
}
