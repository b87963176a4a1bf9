/**
 * The widget's styles, inside its shadow root (the page's styles do not reach in, nor these
 * out). Themed through CSS custom properties set on the element or any ancestor (they inherit
 * into the shadow root); docs/widget.md lists them. Applied as a constructed stylesheet, so a
 * page whose CSP forbids inline styles still shows the widget.
 */
export const WIDGET_CSS = `
:host { all: initial; display: block; font-family: var(--parley-font, system-ui, -apple-system, "Segoe UI", Roboto, sans-serif); font-size: 15px; line-height: 1.4; color: var(--parley-text, #1b1f24); }
:host([hidden]) { display: none; }
* { box-sizing: border-box; }
.root { position: fixed; z-index: var(--parley-z-index, 2147483000); display: flex; flex-direction: column; align-items: flex-end; gap: 12px; max-width: calc(100vw - 2 * var(--parley-offset, 20px)); }
.root[data-position="bottom-right"] { right: var(--parley-offset, 20px); bottom: var(--parley-offset, 20px); }
.root[data-position="bottom-left"] { left: var(--parley-offset, 20px); bottom: var(--parley-offset, 20px); align-items: flex-start; }
.root[data-position="top-right"] { right: var(--parley-offset, 20px); top: var(--parley-offset, 20px); flex-direction: column-reverse; }
.root[data-position="top-left"] { left: var(--parley-offset, 20px); top: var(--parley-offset, 20px); flex-direction: column-reverse; align-items: flex-start; }
.root[data-position="inline"] { position: relative; align-items: stretch; max-width: 100%; }
button { font: inherit; cursor: pointer; border-radius: 999px; border: 1px solid transparent; padding: 8px 14px; min-height: 40px; }
button:focus-visible, input:focus-visible, a:focus-visible { outline: 3px solid var(--parley-focus, #f2a60d); outline-offset: 2px; }
button:disabled { cursor: not-allowed; opacity: 0.6; }
.launcher { display: inline-flex; align-items: center; gap: 10px; background: var(--parley-accent, #1849d6); color: var(--parley-accent-text, #ffffff); box-shadow: var(--parley-shadow, 0 6px 24px rgba(15, 23, 42, 0.22)); font-weight: 600; max-width: 100%; }
.launcher .dot { width: 10px; height: 10px; border-radius: 50%; background: currentColor; opacity: 0.55; flex: none; }
.root[data-call="live"] .launcher .dot { opacity: 1; background: var(--parley-live, #3ddc84); }
.launcher .label { overflow: hidden; text-overflow: ellipsis; white-space: nowrap; }
.card { width: min(var(--parley-width, 370px), calc(100vw - 2 * var(--parley-offset, 20px))); max-height: min(var(--parley-height, 560px), calc(100vh - 96px)); display: flex; flex-direction: column; background: var(--parley-background, #ffffff); color: var(--parley-text, #1b1f24); border: 1px solid var(--parley-border, #d0d7de); border-radius: var(--parley-radius, 16px); box-shadow: var(--parley-shadow, 0 6px 24px rgba(15, 23, 42, 0.22)); overflow: hidden; }
.root[data-position="inline"] .card { width: 100%; box-shadow: none; }
.card[hidden] { display: none; }
.head { display: flex; align-items: center; gap: 10px; padding: 12px 14px; border-bottom: 1px solid var(--parley-border, #d0d7de); }
.avatar { width: 34px; height: 34px; border-radius: 50%; background: var(--parley-accent, #1849d6); flex: none; }
.root[data-state="speaking"] .avatar { box-shadow: 0 0 0 4px color-mix(in srgb, var(--parley-accent, #1849d6) 30%, transparent); }
.titles { flex: 1; min-width: 0; }
h2 { font-size: 16px; margin: 0; overflow: hidden; text-overflow: ellipsis; white-space: nowrap; }
.status { margin: 0; font-size: 13px; color: var(--parley-muted, #57606a); }
.close { background: transparent; color: var(--parley-text, #1b1f24); border-color: var(--parley-border, #d0d7de); padding: 4px 12px; min-height: 32px; }
.body { flex: 1; overflow-y: auto; padding: 12px 14px; display: flex; flex-direction: column; gap: 10px; min-height: 120px; }
.greeting, .notice { margin: 0; color: var(--parley-muted, #57606a); }
.error { margin: 0; padding: 8px 10px; border-radius: 8px; background: var(--parley-error-background, #fdecea); color: var(--parley-error, #8a1c12); }
.error[hidden], .notice[hidden], .greeting[hidden], .consent[hidden] { display: none; }
.consent { border: 1px solid var(--parley-border, #d0d7de); border-radius: 10px; padding: 10px 12px; display: flex; flex-direction: column; gap: 8px; }
.consent h3 { margin: 0; font-size: 15px; }
.consent p { margin: 0; white-space: pre-wrap; }
.consent ul { margin: 0; padding-left: 18px; }
.consent a { color: var(--parley-link, #1849d6); }
.row { display: flex; flex-wrap: wrap; gap: 8px; }
.transcript { display: flex; flex-direction: column; gap: 8px; }
.transcript[hidden] { display: none; }
.msg { margin: 0; max-width: 85%; padding: 8px 12px; border-radius: 14px; white-space: pre-wrap; overflow-wrap: anywhere; }
.msg.agent { align-self: flex-start; background: var(--parley-agent-bubble, #eef1f6); color: var(--parley-agent-bubble-text, #1b1f24); border-bottom-left-radius: 4px; }
.msg.user { align-self: flex-end; background: var(--parley-user-bubble, #1849d6); color: var(--parley-user-bubble-text, #ffffff); border-bottom-right-radius: 4px; }
.msg.partial { opacity: 0.75; }
.tool { margin: 0; align-self: center; font-size: 13px; color: var(--parley-muted, #57606a); border: 1px dashed var(--parley-border, #d0d7de); border-radius: 999px; padding: 3px 10px; }
.tool[data-status="failed"] { color: var(--parley-error, #8a1c12); }
.compose { display: flex; gap: 8px; padding: 10px 14px; border-top: 1px solid var(--parley-border, #d0d7de); }
.compose[hidden] { display: none; }
.compose input { flex: 1; min-width: 0; font: inherit; padding: 8px 12px; border-radius: 999px; border: 1px solid var(--parley-border, #8c959f); background: var(--parley-background, #ffffff); color: var(--parley-text, #1b1f24); }
.controls { display: flex; flex-wrap: wrap; gap: 8px; padding: 0 14px 12px; justify-content: flex-end; }
.primary { background: var(--parley-accent, #1849d6); color: var(--parley-accent-text, #ffffff); }
.secondary { background: transparent; color: var(--parley-text, #1b1f24); border-color: var(--parley-border, #8c959f); }
.secondary[aria-pressed="true"] { background: var(--parley-agent-bubble, #eef1f6); }
.danger { background: var(--parley-danger, #b42318); color: #ffffff; }
.controls [hidden], .compose [hidden] { display: none; }
.sr { position: absolute; width: 1px; height: 1px; overflow: hidden; clip: rect(0 0 0 0); white-space: nowrap; }
@media (prefers-reduced-motion: no-preference) { .card { animation: parley-in 140ms ease-out; } }
@keyframes parley-in { from { opacity: 0; transform: translateY(6px); } to { opacity: 1; transform: none; } }
`;
