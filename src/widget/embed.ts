/**
 * The served `/widget.js` (one classic script, everything inside): the platform it came from is
 * the elements' default `server-url`. `document.currentScript` names it when loaded as a classic
 * script; loaded as a module it is found among the page's scripts by its path.
 */
import { defineParleyAgent, setDefaultServerUrl } from './element.ts';

function ownOrigin(): string | undefined {
  const doc = (globalThis as { document?: Document }).document;
  if (!doc) return undefined;
  const current = doc.currentScript as HTMLScriptElement | null;
  const src = current?.src || [...doc.querySelectorAll<HTMLScriptElement>('script[src]')].map((s) => s.src).find((s) => /\/widget\.js(\?|#|$)/.test(s));
  if (!src) return undefined;
  try {
    return new URL(src).origin;
  } catch {
    return undefined;
  }
}

// Before the element is defined: defining it upgrades the elements already on the page, which
// read their server at once.
setDefaultServerUrl(ownOrigin());
defineParleyAgent();
