import type { Outbound, StoredDraft } from './schema.ts';

/**
 * The platform default public voice model id (32 hex characters), used by new drafts.
 * The voice-model registry must list a public model under this id.
 */
export const DEFAULT_VOICE_ID = '5f1e9c0b7a3d4e8f9b2c6a1d0e4f7b3c';

export const DEFAULT_FIRST_MESSAGE = 'Hi! Thanks for calling — how can I help you today?';
export const DEFAULT_FIRST_MESSAGE_PROMPT = 'Greet the caller and ask what you can help with.';
export const DEFAULT_INIT_TIMEOUT_SECONDS = 5;

/** What `conversation.outbound` means when it is null, and the base a first partial object merges over. */
export function defaultOutbound(): Outbound {
  return { amd_enabled: true, voicemail: { action: 'hangup', message: '' } };
}

/** A fresh default draft (every default of the spec's tables and docs/api/agents.md). A new object each call. */
export function createDefaultDraft(): StoredDraft {
  return {
    prompt: {
      system_prompt: '',
      first_message_mode: 'prompt',
      first_message: DEFAULT_FIRST_MESSAGE,
      first_message_prompt: DEFAULT_FIRST_MESSAGE_PROMPT,
    },
    voice: {
      voice_id: DEFAULT_VOICE_ID,
      speaking_language: 'en',
      expressive: false,
    },
    conversation: {
      max_duration_seconds: 1800,
      eagerness: 'balanced',
      interruptible: true,
      interruption_sensitivity: 'balanced',
      reengage_enabled: false,
      record_audio: true,
      timezone: '',
      transfer_destinations: [],
      hangup_after_seconds: 60,
      hangup_farewell_enabled: false,
      outbound: null,
    },
    tools: {
      enabled: true,
      tool_ids: [],
      system_tools: { hang_up_call: false },
    },
    webhooks: {
      post_call: [],
      conversation_init: null,
    },
    knowledge_base: {
      enabled: false,
      knowledge_source_ids: [],
    },
    analysis: {
      summary: { enabled: true, prompt: null, language: 'en' },
      data_fields: [],
      criteria: [],
    },
    guardrails: {
      focus: false,
      manipulation: false,
    },
    llm: {
      tier: 'medium',
      custom: null,
    },
  };
}
