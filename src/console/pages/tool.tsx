/**
 * A tool: every field (credential headers write-only), Test with arguments showing the request
 * that was sent and the response, the agents that use it, delete (a 409 explained).
 */
import { useState } from 'preact/hooks';
import { useLocation, useRoute } from 'preact-iso';
import { ApiError, tools, type Tool, type ToolTestResult } from '../api.ts';
import { useTitle } from '../app.tsx';
import { changes, setPath } from '../config-edit.ts';
import { Checkbox, ConfirmButton, Form, Loading, NumberField, Problem, Select, TextArea, TextField, useAction, useLoad } from '../ui.tsx';

interface HeaderEdit { name: string; kind: 'custom' | 'authorization_bearer' | 'authorization_basic'; value: string; secret: boolean; had_secret: boolean }
type ToolEdit = Omit<Tool, 'tool_id' | 'used_by' | 'created_at' | 'updated_at' | 'headers'> & { headers: HeaderEdit[] };

const BLANK: ToolEdit = {
  name: '', description: '', tool_type: 'webhook', method: 'POST', url: '', content_type: 'application/json', body_template: '',
  arguments: [], headers: [], timeout_seconds: 30, error_handling: 'passthrough', expects_response: true, execution_mode: 'blocking', mock_responses: [],
};

function toEdit(t: Tool): ToolEdit {
  const { tool_id: _i, used_by: _u, created_at: _c, updated_at: _p, headers, ...rest } = t;
  return structuredClone({ ...rest, headers: headers.map((h) => ({ name: h.name, kind: h.kind, value: h.value ?? '', secret: h.has_secret, had_secret: h.has_secret })) });
}

/** The body to send: headers without the form's display flags (and `secret` only for custom ones). */
function headersOut(hs: HeaderEdit[]) {
  return hs.map((h) => ({ name: h.name, kind: h.kind, value: h.value, ...(h.kind === 'custom' ? { secret: h.secret } : {}) }));
}

export default function ToolPage() {
  const { params } = useRoute();
  const id = params.id!;
  const isNew = id === 'new';
  const tool = useLoad(() => (isNew ? Promise.resolve(null) : tools.get(id)), [id]);
  useTitle(isNew ? 'New tool' : tool.data ? tool.data.name : 'Tool');
  if (tool.error) return <Problem error={tool.error} />;
  // The same page serves /tools/new and /tools/{id}: wait for the data of this address.
  const current = isNew ? null : tool.data && tool.data.tool_id === id ? tool.data : undefined;
  if (current === undefined) return <Loading />;
  return <ToolEditor key={id} tool={current} onSaved={(t) => tool.set(t)} />;
}

function ToolEditor({ tool, onSaved }: { tool: Tool | null; onSaved: (t: Tool) => void }) {
  const { route } = useLocation();
  const original = tool ? toEdit(tool) : BLANK;
  const [edit, setEdit] = useState<ToolEdit>(original);
  const [saved, setSaved] = useState(false);
  const set = (path: string, v: unknown) => {
    setSaved(false);
    setEdit((e) => setPath(e, path, v));
  };
  const headersChanged = JSON.stringify(headersOut(edit.headers)) !== JSON.stringify(headersOut(original.headers)) || edit.headers.some((h) => h.had_secret && h.value !== '');
  const save = useAction(async () => {
    // Headers are replaced whole: a secret kept must be typed again (the API never shows it).
    if (headersChanged) {
      const missing = edit.headers.map((h, i) => [h, i] as const).filter(([h]) => (h.kind !== 'custom' || h.secret) && h.value === '');
      if (missing.length) throw new ApiError(422, 'Type the value of every secret header: headers are saved together.', missing.map(([, i]) => ({ type: 'missing', loc: ['body', 'headers', i, 'value'], msg: 'Type the secret value again (it is never shown)' })));
    }
    const { headers, ...rest } = edit;
    if (!tool) {
      const created = await tools.create({ ...rest, headers: headersOut(headers) });
      route(`/tools/${created.tool_id}`, true);
      return;
    }
    const { headers: _h, ...before } = original;
    const patch = { ...(changes(before, rest) as object | undefined), ...(headersChanged ? { headers: headersOut(headers) } : {}) };
    if (Object.keys(patch).length === 0) return;
    const next = await tools.update(tool.tool_id, patch);
    onSaved(next);
    setEdit(toEdit(next));
    setSaved(true);
  });
  const webhook = edit.tool_type === 'webhook';
  return (
    <>
      <h1>{tool ? tool.name : 'New tool'}</h1>
      <p><a href="/tools">All tools</a></p>
      {saved && <p class="ok" role="status">Saved.</p>}
      <Form error={save.error} onSubmit={() => save.run()} label="Tool">
        <fieldset>
          <legend>Tool</legend>
          <div class="grid2">
            <TextField label="Name" name="name" value={edit.name} onInput={(v) => set('name', v)} hint="The model calls the tool by this name" />
            <Select label="Type" name="tool_type" value={edit.tool_type} onChange={(v) => set('tool_type', v)} options={[['webhook', 'Webhook (the platform calls a URL)'], ['client', 'Client (the caller\'s app answers)']]} />
          </div>
          <TextArea label="Description" name="description" rows={2} value={edit.description} onInput={(v) => set('description', v)} hint="Tells the model when to use it" />
          <div class="grid2">
            <Select label="Execution" name="execution_mode" value={edit.execution_mode} onChange={(v) => set('execution_mode', v)} options={['blocking', 'fire_and_forget', 'background']} />
            <NumberField label="Timeout (seconds)" name="timeout_seconds" value={edit.timeout_seconds} onInput={(v) => set('timeout_seconds', v)} min={1} max={300} />
            <Select label="Errors" name="error_handling" value={edit.error_handling} onChange={(v) => set('error_handling', v)} options={[['passthrough', 'Pass the error to the model'], ['hide', 'Hide the error']]} />
          </div>
          <Checkbox label="Expects a response" name="expects_response" checked={edit.expects_response} onChange={(v) => set('expects_response', v)} />
        </fieldset>
        {webhook && (
          <fieldset>
            <legend>Request</legend>
            <div class="grid2">
              <Select label="Method" name="method" value={edit.method} onChange={(v) => set('method', v)} options={['GET', 'POST', 'PUT', 'PATCH', 'DELETE']} />
              <TextField label="URL" name="url" type="url" value={edit.url} onInput={(v) => set('url', v)} hint="{{argument}} placeholders are filled in" />
              <TextField label="Content type" name="content_type" value={edit.content_type} onInput={(v) => set('content_type', v)} />
            </div>
            <TextArea label="Body template" name="body_template" rows={3} value={edit.body_template} onInput={(v) => set('body_template', v)} />
            <h3>Headers</h3>
            <p class="muted small">Credential headers and headers marked secret are write-only: their values are never shown again. Changing any header saves them all, so type secret values again then.</p>
            {edit.headers.map((h, i) => (
              <div class="list-item grid2" key={i}>
                <TextField label={`Header ${i + 1} name`} name={`headers.${i}.name`} value={h.name} onInput={(v) => set(`headers.${i}.name`, v)} />
                <Select label={`Header ${i + 1} kind`} name={`headers.${i}.kind`} value={h.kind} onChange={(v) => set(`headers.${i}.kind`, v)}
                  options={[['custom', 'Custom'], ['authorization_bearer', 'Credential: bearer'], ['authorization_basic', 'Credential: basic']]} />
                <TextField label={`Header ${i + 1} value`} name={`headers.${i}.value`} type={h.kind !== 'custom' || h.secret ? 'password' : 'text'} autoComplete="off" value={h.value}
                  onInput={(v) => set(`headers.${i}.value`, v)} hint={h.had_secret ? 'Secret (hidden)' : undefined} />
                {h.kind === 'custom' && <Checkbox label={`Header ${i + 1} is secret`} name={`headers.${i}.secret`} checked={h.secret} onChange={(v) => set(`headers.${i}.secret`, v)} />}
                <div><button type="button" onClick={() => set('headers', edit.headers.filter((_, j) => j !== i))}>Remove header {i + 1}</button></div>
              </div>
            ))}
            <button type="button" onClick={() => set('headers', [...edit.headers, { name: '', kind: 'custom', value: '', secret: false, had_secret: false }])}>Add header</button>
          </fieldset>
        )}
        <fieldset>
          <legend>Arguments</legend>
          {edit.arguments.map((a, i) => (
            <div class="list-item grid2" key={i}>
              <TextField label={`Argument ${i + 1} name`} name={`arguments.${i}.name`} value={a.name} onInput={(v) => set(`arguments.${i}.name`, v)} />
              <TextField label={`Argument ${i + 1} description`} name={`arguments.${i}.description`} value={a.description} onInput={(v) => set(`arguments.${i}.description`, v)} />
              <div><button type="button" onClick={() => set('arguments', edit.arguments.filter((_, j) => j !== i))}>Remove argument {i + 1}</button></div>
            </div>
          ))}
          <button type="button" onClick={() => set('arguments', [...edit.arguments, { name: '', description: '' }])}>Add argument</button>
        </fieldset>
        {webhook && (
          <fieldset>
            <legend>Mock responses</legend>
            {edit.mock_responses.map((m, i) => (
              <div class="list-item grid2" key={i}>
                <TextField label={`Mock ${i + 1} name`} name={`mock_responses.${i}.name`} value={m.name} onInput={(v) => set(`mock_responses.${i}.name`, v)} />
                <NumberField label={`Mock ${i + 1} status`} name={`mock_responses.${i}.status_code`} value={m.status_code} onInput={(v) => set(`mock_responses.${i}.status_code`, v)} />
                <TextField label={`Mock ${i + 1} content type`} name={`mock_responses.${i}.content_type`} value={m.content_type} onInput={(v) => set(`mock_responses.${i}.content_type`, v)} />
                <TextArea label={`Mock ${i + 1} body`} name={`mock_responses.${i}.body`} rows={2} value={m.body} onInput={(v) => set(`mock_responses.${i}.body`, v)} />
                <div><button type="button" onClick={() => set('mock_responses', edit.mock_responses.filter((_, j) => j !== i))}>Remove mock {i + 1}</button></div>
              </div>
            ))}
            <button type="button" onClick={() => set('mock_responses', [...edit.mock_responses, { name: '', status_code: 200, content_type: 'application/json', body: '' }])}>Add mock response</button>
          </fieldset>
        )}
        <div class="buttons">
          <button type="submit" class="primary" disabled={save.pending}>{tool ? 'Save' : 'Create tool'}</button>
        </div>
      </Form>
      {tool && tool.tool_type === 'webhook' && <ToolTest tool={tool} />}
      {tool && <UsedBy tool={tool} />}
    </>
  );
}

function ToolTest({ tool }: { tool: Tool }) {
  const [args, setArgs] = useState<Record<string, string>>({});
  const [mock, setMock] = useState('');
  const [result, setResult] = useState<ToolTestResult | null>(null);
  const test = useAction(async () => {
    setResult(null);
    // Values that read as JSON (numbers, true, objects) are sent as such; anything else as text.
    const values = Object.fromEntries(Object.entries(args).filter(([, v]) => v !== '').map(([k, v]) => {
      try {
        return [k, JSON.parse(v)];
      } catch {
        return [k, v];
      }
    }));
    setResult(await tools.test(tool.tool_id, { arguments: values, ...(mock ? { mock } : {}) }));
  });
  return (
    <section class="card" aria-labelledby="test-h">
      <h2 id="test-h">Test</h2>
      <p class="muted">Calls the saved tool once with these arguments, as a conversation would.</p>
      <Form error={test.error} onSubmit={() => test.run()} label="Test the tool">
        {tool.arguments.length === 0 && <p class="muted">The tool declares no arguments.</p>}
        <div class="grid2">
          {tool.arguments.map((a) => (
            <TextField key={a.name} label={`Argument ${a.name}`} name={`arguments.${a.name}`} value={args[a.name] ?? ''} onInput={(v) => setArgs({ ...args, [a.name]: v })} hint={a.description || undefined} />
          ))}
        </div>
        {tool.mock_responses.length > 0 && (
          <Select label="Answer from" name="mock" value={mock} onChange={setMock} options={[['', 'The real endpoint'], ...tool.mock_responses.map((m) => [m.name, `Mock: ${m.name}`] as [string, string])]} />
        )}
        <button type="submit" class="primary" disabled={test.pending}>Test</button>
      </Form>
      {result && (
        <div class="grid2">
          <div>
            <h3>Request sent</h3>
            {result.request ? (
              <pre aria-label="Request sent">{`${result.request.method} ${result.request.url}\n${Object.entries(result.request.headers).map(([k, v]) => `${k}: ${v ?? '(secret)'}`).join('\n')}${result.request.body !== null ? `\n\n${result.request.body}` : ''}`}</pre>
            ) : <p>Nothing was sent: the mock response {result.mock} answered.</p>}
          </div>
          <div>
            <h3>Response</h3>
            <pre aria-label="Response">{`${result.status_code} (${result.latency_ms} ms)\n${Object.entries(result.headers).map(([k, v]) => `${k}: ${v}`).join('\n')}\n\n${result.body}${result.response_truncated ? '\n…(cut at 64 KB)' : ''}`}</pre>
          </div>
        </div>
      )}
    </section>
  );
}

function UsedBy({ tool }: { tool: Tool }) {
  const { route } = useLocation();
  const users = useLoad(() => tools.agents(tool.tool_id), [tool.tool_id]);
  const remove = useAction(async () => {
    try {
      await tools.remove(tool.tool_id);
    } catch (err) {
      if (err instanceof ApiError && err.status === 409) {
        users.reload();
        throw new Error(`${err.message} It is attached to the drafts of the agents listed above: remove it from their Tools section (and save), then delete it.`);
      }
      throw err;
    }
    route('/tools');
  });
  return (
    <section aria-labelledby="used-h">
      <h2 id="used-h">Agents using this tool</h2>
      <Problem error={users.error} />
      {users.data && (users.data.length === 0 ? <p>No agent's draft uses this tool.</p> : (
        <ul>{users.data.map((a) => <li key={a.agent_id}><a href={`/agents/${a.agent_id}`}>{a.name}</a></li>)}</ul>
      ))}
      <ConfirmButton label="Delete tool" question={`Delete the tool ${tool.name}?`} confirmLabel="Delete" onConfirm={() => remove.run()} />
      <Problem error={remove.error} />
    </section>
  );
}
