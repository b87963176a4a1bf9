/**
 * Agent: the draft as a form (Save sends exactly the changed fields), an unsaved-changes
 * warning, Publish with a title and description, the versions, a version's configuration and
 * its difference from the draft.
 */
import { useEffect, useState } from 'preact/hooks';
import { useRoute } from 'preact-iso';
import { agents, knowledge, speech, tools as toolsApi, type Agent, type AgentConfig, type Version } from '../api.ts';
import { useTitle } from '../app.tsx';
import { changes, equal, leafDiff, setPath, toEdit, toProfile, type ConfigEdit, type ProfileEdit } from '../config-edit.ts';
import { AgentNav } from '../agent-nav.tsx';
import { Form, Loading, Notice, Problem, TextArea, TextField, When, useAction, useLoad } from '../ui.tsx';
import {
  AnalysisSection, ConversationSection, KnowledgeSection, LlmSection, ProfileSection, PromptSection, PublicSection, ToolsSection, VoiceSection, WebhooksSection,
} from './agent-form.tsx';

export default function AgentPage() {
  const { params } = useRoute();
  const id = params.id!;
  const data = useLoad(async () => {
    const [agent, config, tools, sources, voices] = await Promise.all([
      agents.get(id), agents.config(id), toolsApi.list({ page_size: 100 }), knowledge.list({ page_size: 100 }), speech.voices(),
    ]);
    return { agent, config, tools: tools.items, sources: sources.items, voices };
  }, [id]);
  useTitle(data.data ? data.data.agent.name : 'Agent');
  if (data.error) return <Problem error={data.error} />;
  if (!data.data || data.data.agent.agent_id !== id) return <Loading />;
  return <AgentEditor key={id} {...data.data} />;
}

function AgentEditor(props: { agent: Agent; config: AgentConfig; tools: Awaited<ReturnType<typeof toolsApi.list>>['items']; sources: Awaited<ReturnType<typeof knowledge.list>>['items']; voices: Awaited<ReturnType<typeof speech.voices>> }) {
  const [agent, setAgent] = useState(props.agent);
  const [config, setConfig] = useState(props.config);
  const [edit, setEdit] = useState<ConfigEdit>(() => toEdit(props.config));
  const [profile, setProfile] = useState<ProfileEdit>(() => toProfile(props.agent));
  const [saved, setSaved] = useState(false);
  const configPatch = changes(toEdit(config), edit);
  const profilePatch = changes(toProfile(agent), profile);
  const dirty = configPatch !== undefined || profilePatch !== undefined;
  const set = (path: string, value: unknown) => {
    setSaved(false);
    setEdit((e) => setPath(e, path, value));
  };
  useUnsavedWarning(dirty);

  const save = useAction(async () => {
    if (profilePatch) setAgent(await agents.update(agent.agent_id, profilePatch as Partial<ProfileEdit>));
    if (configPatch) {
      const next = await agents.patchConfig(agent.agent_id, configPatch);
      setConfig(next);
      setEdit(toEdit(next));
    }
    if (profilePatch) setProfile(toProfile(await agents.get(agent.agent_id)));
    setSaved(true);
  });
  const sectionProps = { edit, set, profile, setProfile: (p: ProfileEdit) => { setSaved(false); setProfile(p); }, tools: props.tools, sources: props.sources, voices: props.voices };

  return (
    <>
      <div class="page-head">
        <h1>{agent.name}</h1>
        <span class={`badge ${agent.publication_state}`}>{agent.publication_state === 'live' ? 'Published' : 'Draft only'}</span>
      </div>
      <AgentNav id={agent.agent_id} current="agent" />
      {dirty && <Notice>You have unsaved changes. Press Save to keep them.</Notice>}
      {saved && !dirty && <p class="ok" role="status">Saved.</p>}
      <Form error={save.error} onSubmit={() => save.run()} label="Agent configuration">
        <ProfileSection {...sectionProps} />
        <PromptSection {...sectionProps} />
        <VoiceSection {...sectionProps} />
        <ConversationSection {...sectionProps} />
        <ToolsSection {...sectionProps} />
        <KnowledgeSection {...sectionProps} />
        <WebhooksSection {...sectionProps} />
        <AnalysisSection {...sectionProps} />
        <PublicSection {...sectionProps} />
        <LlmSection {...sectionProps} />
        <div class="buttons sticky">
          <button type="submit" class="primary" disabled={!dirty || save.pending}>Save</button>
          <button type="button" disabled={!dirty} onClick={() => { setEdit(toEdit(config)); setProfile(toProfile(agent)); }}>Discard changes</button>
        </div>
      </Form>
      <Publishing agent={agent} config={config} dirty={dirty} onPublished={() => agents.get(agent.agent_id).then(setAgent)} />
    </>
  );
}

/** Warns before leaving with unsaved changes: closing the tab, or following a link in the console. */
function useUnsavedWarning(dirty: boolean) {
  useEffect(() => {
    if (!dirty) return;
    const beforeUnload = (e: BeforeUnloadEvent) => e.preventDefault();
    const onClick = (e: MouseEvent) => {
      const a = (e.target as Element | null)?.closest?.('a[href]');
      if (a && !a.getAttribute('href')!.startsWith('#') && !confirm('You have unsaved changes. Leave this page and lose them?')) {
        e.preventDefault();
        e.stopImmediatePropagation();
      }
    };
    addEventListener('beforeunload', beforeUnload);
    addEventListener('click', onClick, true);
    return () => {
      removeEventListener('beforeunload', beforeUnload);
      removeEventListener('click', onClick, true);
    };
  }, [dirty]);
}

function Publishing({ agent, config, dirty, onPublished }: { agent: Agent; config: AgentConfig; dirty: boolean; onPublished: () => void }) {
  const versions = useLoad(() => agents.versions(agent.agent_id), [agent.agent_id]);
  const [title, setTitle] = useState('');
  const [description, setDescription] = useState('');
  const [shown, setShown] = useState<{ mode: 'view' | 'diff'; version: Version & { config: AgentConfig } } | null>(null);
  const publish = useAction(async () => {
    const v = await agents.publish(agent.agent_id, { ...(title ? { version_title: title } : {}), ...(description ? { version_description: description } : {}) });
    setTitle('');
    setDescription('');
    versions.reload();
    onPublished();
    return v;
  });
  const open = useAction(async (n: number, mode: 'view' | 'diff') => setShown({ mode, version: await agents.version(agent.agent_id, n) }));
  const latest = versions.data?.items[0];
  return (
    <>
      <section class="card" aria-labelledby="publish-h">
        <h2 id="publish-h">Publish</h2>
        <p class="muted">Publishing freezes the saved draft, with its tools and knowledge as they are now, as the next version. Sessions and phone calls use the latest version.</p>
        {latest && equal(latest.config_hash, config.config_hash) && <p>The saved draft is the same as version {latest.version_number}.</p>}
        <Form error={publish.error} onSubmit={() => publish.run()} label="Publish">
          <TextField label="Version title" name="version_title" value={title} onInput={setTitle} />
          <TextArea label="Version description" name="version_description" rows={2} value={description} onInput={setDescription} />
          {dirty && <p class="muted">Save your changes first: Publish publishes the saved draft.</p>}
          <button type="submit" class="primary" disabled={dirty || publish.pending}>Publish</button>
        </Form>
      </section>
      <section aria-labelledby="versions-h">
        <h2 id="versions-h">Versions</h2>
        <Problem error={versions.error ?? open.error} />
        {versions.data && (versions.data.items.length === 0 ? <p>Not published yet.</p> : (
          <div class="table-wrap" tabIndex={0}>
            <table class="stack">
              <thead><tr><th scope="col">Version</th><th scope="col">Title</th><th scope="col">Published</th><th scope="col"><span class="visually-hidden">Actions</span></th></tr></thead>
              <tbody>
                {versions.data.items.map((v) => (
                  <tr key={v.version_number}>
                    <td>{v.version_number}</td>
                    <td>{v.version_title ?? <span class="muted">—</span>}{v.version_description && <div class="muted small">{v.version_description}</div>}</td>
                    <td><When at={v.published_at} /></td>
                    <td class="actions">
                      <button type="button" onClick={() => open.run(v.version_number, 'view')}>View version {v.version_number}</button>
                      <button type="button" onClick={() => open.run(v.version_number, 'diff')}>Compare version {v.version_number} with the draft</button>
                    </td>
                  </tr>
                ))}
              </tbody>
            </table>
          </div>
        ))}
        {shown && (shown.mode === 'view' ? (
          <section class="card" aria-labelledby="version-h">
            <h3 id="version-h">Version {shown.version.version_number}: configuration</h3>
            <pre>{JSON.stringify(shown.version.config, null, 2)}</pre>
          </section>
        ) : (
          <VersionDiff version={shown.version} draft={config} />
        ))}
      </section>
    </>
  );
}

function VersionDiff({ version, draft }: { version: Version & { config: AgentConfig }; draft: AgentConfig }) {
  const rows = leafDiff(version.config, draft).filter(([path]) => path !== 'config_hash');
  const show = (v: unknown) => (v === undefined ? '—' : typeof v === 'string' ? v : JSON.stringify(v));
  return (
    <section class="card diff" aria-labelledby="diff-h">
      <h3 id="diff-h">Version {version.version_number} compared with the saved draft</h3>
      {rows.length === 0 ? <p>No differences: the saved draft is the same as version {version.version_number}.</p> : (
        <div class="table-wrap" tabIndex={0}>
          <table class="stack">
            <thead><tr><th scope="col">Setting</th><th scope="col">Version {version.version_number}</th><th scope="col">Draft</th></tr></thead>
            <tbody>
              {rows.map(([path, a, b]) => (
                <tr key={path}>
                  <th scope="row"><code>{path}</code></th>
                  <td><del>{show(a)}</del></td>
                  <td><ins>{show(b)}</ins></td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
    </section>
  );
}
