/**
 * `parley/widget`: the `<parley-agent>` custom element for bundlers. Importing it registers
 * the element (once); give it `server-url` (a bundled app has no script URL to take it from).
 *
 * ```ts
 * import 'parley/widget';
 * // <parley-agent agent-id="agent_…" server-url="https://voice.example.com"></parley-agent>
 * ```
 *
 * Pages without a build step load the same element from the platform instead:
 * `<script src="https://voice.example.com/widget.js" async></script>` (docs/widget.md).
 */
import { defineParleyAgent } from './element.ts';

export { ParleyAgentElement, defineParleyAgent, setDefaultServerUrl, type SessionTokenProvider, type WidgetDisplayConfig, type WidgetEventMap } from './element.ts';
export { DEFAULT_TEXTS, type WidgetTextKey, type WidgetTexts } from './texts.ts';

defineParleyAgent();
