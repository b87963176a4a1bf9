/**
 * The console's building blocks: labelled fields that show the API's 422 message for their
 * `loc`, messages, confirmation, pagination, and a hook for loading data.
 */
import type { ComponentChildren } from 'preact';
import { createContext } from 'preact';
import { useCallback, useContext, useEffect, useId, useRef, useState } from 'preact/hooks';
import { ApiError, type FieldError } from './api.ts';

/** A 422's field errors by dotted path without the leading `body`/`query` (`prompt.system_prompt`). */
export type Errors = Record<string, string>;

export function errorsOf(err: unknown): Errors {
  const out: Errors = {};
  if (err instanceof ApiError) for (const f of err.fields) out[pathOf(f)] = f.msg;
  return out;
}

export function pathOf(f: FieldError): string {
  const loc = f.loc[0] === 'body' || f.loc[0] === 'query' || f.loc[0] === 'path' ? f.loc.slice(1) : f.loc;
  return loc.join('.');
}

/** The errors of a form: fields read theirs by name; the form lists those no field showed. */
export const ErrorsContext = createContext<Errors>({});

/** A message that says what went wrong; for 422s the form's fields carry the details. */
export function Problem({ error }: { error: unknown }) {
  if (!error) return null;
  const text = error instanceof Error ? error.message : String(error);
  return <p class="problem" role="alert">{text}</p>;
}

export function Notice({ children }: { children: ComponentChildren }) {
  return <p class="notice" role="status">{children}</p>;
}

interface FieldProps {
  label: string;
  /** The field's path in the API body, for its 422 message. */
  name: string;
  hint?: string;
}

function useFieldIds(name: string) {
  const id = useId();
  const errors = useContext(ErrorsContext);
  const error = errors[name];
  return { id, error, errorId: `${id}-err`, hintId: `${id}-hint` };
}

function FieldShell({ id, label, hint, hintId, error, errorId, children }: { id: string; label: string; hint?: string; hintId: string; error?: string; errorId: string; children: ComponentChildren }) {
  return (
    <div class={`field${error ? ' invalid' : ''}`}>
      <label for={id}>{label}</label>
      {children}
      {hint && <small id={hintId} class="hint">{hint}</small>}
      {error && <small id={errorId} class="field-error">{error}</small>}
    </div>
  );
}

const describedBy = (hint: string | undefined, hintId: string, error: string | undefined, errorId: string) =>
  [hint ? hintId : '', error ? errorId : ''].filter(Boolean).join(' ') || undefined;

export function TextField(p: FieldProps & { value: string; onInput: (v: string) => void; type?: 'text' | 'number' | 'password' | 'email' | 'url' | 'search' | 'date' | 'tel'; required?: boolean; placeholder?: string; autoComplete?: string; inputMode?: 'numeric' | 'tel' | 'email' | 'url' | 'text'; min?: number; max?: number; step?: number | string; focus?: boolean }) {
  const f = useFieldIds(p.name);
  const input = useRef<HTMLInputElement>(null);
  // `focus`: the field takes the keyboard when it appears (a form just opened by a button).
  useEffect(() => {
    if (p.focus) input.current?.focus();
  }, []);
  return (
    <FieldShell {...f} label={p.label} hint={p.hint}>
      <input
        ref={input} id={f.id} name={p.name} type={(p.type ?? 'text') as 'text'} value={p.value} required={p.required} placeholder={p.placeholder} autoComplete={p.autoComplete}
        inputMode={p.inputMode} min={p.min} max={p.max} step={p.step}
        aria-invalid={f.error ? true : undefined} aria-describedby={describedBy(p.hint, f.hintId, f.error, f.errorId)}
        onInput={(e) => p.onInput((e.currentTarget as HTMLInputElement).value)}
      />
    </FieldShell>
  );
}

export function NumberField(p: FieldProps & { value: number; onInput: (v: number) => void; min?: number; max?: number; step?: number }) {
  return <TextField {...p} type="number" value={String(p.value)} onInput={(v) => p.onInput(v === '' ? NaN : Number(v))} />;
}

export function TextArea(p: FieldProps & { value: string; onInput: (v: string) => void; rows?: number }) {
  const f = useFieldIds(p.name);
  return (
    <FieldShell {...f} label={p.label} hint={p.hint}>
      <textarea
        id={f.id} name={p.name} rows={p.rows ?? 4} value={p.value}
        aria-invalid={f.error ? true : undefined} aria-describedby={describedBy(p.hint, f.hintId, f.error, f.errorId)}
        onInput={(e) => p.onInput((e.currentTarget as HTMLTextAreaElement).value)}
      />
    </FieldShell>
  );
}

export function Select(p: FieldProps & { value: string; onChange: (v: string) => void; options: (string | [value: string, label: string])[] }) {
  const f = useFieldIds(p.name);
  return (
    <FieldShell {...f} label={p.label} hint={p.hint}>
      <select
        id={f.id} name={p.name} value={p.value}
        aria-invalid={f.error ? true : undefined} aria-describedby={describedBy(p.hint, f.hintId, f.error, f.errorId)}
        onChange={(e) => p.onChange((e.currentTarget as HTMLSelectElement).value)}
      >
        {p.options.map((o) => (typeof o === 'string' ? <option key={o} value={o}>{o}</option> : <option key={o[0]} value={o[0]}>{o[1]}</option>))}
      </select>
    </FieldShell>
  );
}

export function Checkbox(p: FieldProps & { checked: boolean; onChange: (v: boolean) => void }) {
  const f = useFieldIds(p.name);
  return (
    <div class={`field check${f.error ? ' invalid' : ''}`}>
      <input
        id={f.id} name={p.name} type="checkbox" checked={p.checked}
        aria-invalid={f.error ? true : undefined} aria-describedby={describedBy(p.hint, f.hintId, f.error, f.errorId)}
        onChange={(e) => p.onChange((e.currentTarget as HTMLInputElement).checked)}
      />
      <label for={f.id}>{p.label}</label>
      {p.hint && <small id={f.hintId} class="hint">{p.hint}</small>}
      {f.error && <small id={f.errorId} class="field-error">{f.error}</small>}
    </div>
  );
}

export function FileField(p: FieldProps & { accept?: string; multiple?: boolean; onChange: (files: File[]) => void }) {
  const f = useFieldIds(p.name);
  return (
    <FieldShell {...f} label={p.label} hint={p.hint}>
      <input
        id={f.id} name={p.name} type="file" accept={p.accept} multiple={p.multiple}
        aria-invalid={f.error ? true : undefined} aria-describedby={describedBy(p.hint, f.hintId, f.error, f.errorId)}
        onChange={(e) => p.onChange([...((e.currentTarget as HTMLInputElement).files ?? [])])}
      />
    </FieldShell>
  );
}

/**
 * A form whose fields show their 422 messages; errors whose `loc` no field on the form shows
 * are listed above the buttons, with their path, so none is lost.
 */
export function Form({ error, onSubmit, children, label }: { error: unknown; onSubmit: () => void; children: ComponentChildren; label?: string }) {
  const errors = errorsOf(error);
  const ref = useRef<HTMLFormElement>(null);
  const [unshown, setUnshown] = useState<[string, string][]>([]);
  useEffect(() => {
    const names = new Set([...(ref.current?.elements ?? [])].map((el) => (el as HTMLInputElement).name).filter(Boolean));
    setUnshown(Object.entries(errors).filter(([k]) => !names.has(k)));
  }, [error]);
  return (
    <ErrorsContext.Provider value={errors}>
      <form ref={ref} aria-label={label} noValidate onSubmit={(e) => { e.preventDefault(); onSubmit(); }}>
        {children}
        {error instanceof ApiError && error.status === 422 ? (
          unshown.length > 0 && (
            <ul class="problem" role="alert">
              {unshown.map(([k, m]) => <li key={k}><code>{k || 'body'}</code>: {m}</li>)}
            </ul>
          )
        ) : (
          <Problem error={error} />
        )}
      </form>
    </ErrorsContext.Provider>
  );
}

/** Data loaded by `load`, reloaded when `deps` change or on `reload()`. */
export function useLoad<T>(load: () => Promise<T>, deps: unknown[] = []) {
  const [state, setState] = useState<{ data?: T; error?: unknown; loading: boolean }>({ loading: true });
  const seq = useRef(0);
  const reload = useCallback(() => {
    const n = ++seq.current;
    setState((s) => ({ ...s, loading: true }));
    load().then(
      (data) => n === seq.current && setState({ data, loading: false }),
      (error) => n === seq.current && setState({ error, loading: false }),
    );
  }, deps);
  useEffect(reload, [reload]);
  return { ...state, reload, set: (data: T) => setState({ data, loading: false }) };
}

/** Runs an action, keeping its pending state and error for the button and the form. */
export function useAction<A extends unknown[], R>(fn: (...args: A) => Promise<R>) {
  const [pending, setPending] = useState(false);
  const [error, setError] = useState<unknown>(null);
  const run = async (...args: A): Promise<R | undefined> => {
    setPending(true);
    setError(null);
    try {
      return await fn(...args);
    } catch (err) {
      setError(err);
      return undefined;
    } finally {
      setPending(false);
    }
  };
  return { run, pending, error, setError };
}

/** Page N of a list that reports its total. */
export function Pager({ page, pageSize, total, hasMore, onPage, label }: { page: number; pageSize: number; total: number | null; hasMore: boolean; onPage: (p: number) => void; label: string }) {
  const pages = total !== null ? Math.max(1, Math.ceil(total / pageSize)) : null;
  return (
    <nav class="pager" aria-label={`${label} pages`}>
      <button type="button" disabled={page <= 1} onClick={() => onPage(page - 1)}>Previous page</button>
      <span>Page {page}{pages !== null ? ` of ${pages}` : ''}</span>
      <button type="button" disabled={!hasMore && (pages === null || page >= pages)} onClick={() => onPage(page + 1)}>Next page</button>
    </nav>
  );
}

/** A button that asks before it acts: the first press shows the question and two buttons. */
export function ConfirmButton({ label, subject, question, confirmLabel, onConfirm, disabled }: { label: string; subject?: string; question: string; confirmLabel: string; onConfirm: () => void; disabled?: boolean }) {
  const [asking, setAsking] = useState(false);
  const yes = useRef<HTMLButtonElement>(null);
  useEffect(() => {
    if (asking) yes.current?.focus();
  }, [asking]);
  // The subject (what is deleted) is read out but not shown: the row already shows it.
  if (!asking) return <button type="button" class="danger" disabled={disabled} onClick={() => setAsking(true)}>{label}{subject && <span class="visually-hidden"> {subject}</span>}</button>;
  return (
    <span class="confirm" role="group" aria-label={question}>
      <span>{question}</span>
      <button ref={yes} type="button" class="danger" onClick={() => { setAsking(false); onConfirm(); }}>{confirmLabel}</button>
      <button type="button" onClick={() => setAsking(false)}>Cancel</button>
    </span>
  );
}

export function Loading() {
  return <p class="muted" role="status">Loading…</p>;
}

/** A date-time in the reader's locale, with the exact instant as a tooltip. */
export function When({ at }: { at: string | null | undefined }) {
  if (!at) return <span class="muted">—</span>;
  return <time dateTime={at} title={at}>{new Date(at).toLocaleString()}</time>;
}

export const money = (n: number) => n.toLocaleString(undefined, { style: 'currency', currency: 'USD', minimumFractionDigits: 2, maximumFractionDigits: 6 });

/** Plays audio bytes (a Blob) in a player the user controls; the object URL is freed on change. */
export function BlobAudio({ blob, label, autoPlay }: { blob: Blob | null; label: string; autoPlay?: boolean }) {
  const [url, setUrl] = useState<string | null>(null);
  useEffect(() => {
    if (!blob) return;
    const u = URL.createObjectURL(blob);
    setUrl(u);
    return () => URL.revokeObjectURL(u);
  }, [blob]);
  if (!url) return null;
  return <audio controls autoPlay={autoPlay} src={url} aria-label={label} />;
}
