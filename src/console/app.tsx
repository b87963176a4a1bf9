/**
 * The console's frame: sign-in by API key, the navigation, and the pages (each loaded on
 * first visit, so the first load stays small).
 */
import { useEffect, useState } from 'preact/hooks';
import { ErrorBoundary, LocationProvider, Route, Router, lazy, useLocation } from 'preact-iso';
import { ApiError, signIn, signOut, storedKey, team as readTeam, type Team } from './api.ts';
import { Form, Problem, TextField, useAction } from './ui.tsx';

const Agents = lazy(() => import('./pages/agents.tsx'));
const AgentPage = lazy(() => import('./pages/agent.tsx'));
const TestCall = lazy(() => import('./pages/test-call.tsx'));
const Sessions = lazy(() => import('./pages/sessions.tsx'));
const SessionPage = lazy(() => import('./pages/session.tsx'));
const Tools = lazy(() => import('./pages/tools.tsx'));
const ToolPage = lazy(() => import('./pages/tool.tsx'));
const Knowledge = lazy(() => import('./pages/knowledge.tsx'));
const PhoneNumbers = lazy(() => import('./pages/phone-numbers.tsx'));
const Speech = lazy(() => import('./pages/speech.tsx'));
const Usage = lazy(() => import('./pages/usage.tsx'));

const NAV: [href: string, label: string][] = [
  ['/agents', 'Agents'],
  ['/sessions', 'Sessions'],
  ['/tools', 'Tools'],
  ['/knowledge', 'Knowledge'],
  ['/phone-numbers', 'Phone numbers'],
  ['/speech', 'Speech'],
  ['/usage', 'Usage'],
];

export function App() {
  const [team, setTeam] = useState<Team | null>(null);
  const [checking, setChecking] = useState(() => storedKey() !== null);
  // A key kept from earlier in this tab: check it once (it may have been revoked since).
  useEffect(() => {
    if (!checking) return;
    readTeam().then(setTeam, () => signOut()).finally(() => setChecking(false));
  }, []);
  if (checking) return <p class="muted" role="status">Loading…</p>;
  return (
    <LocationProvider>
      {team ? <Shell team={team} onSignOut={() => { signOut(); setTeam(null); }} /> : <SignIn onSignedIn={setTeam} />}
    </LocationProvider>
  );
}

function SignIn({ onSignedIn }: { onSignedIn: (t: Team) => void }) {
  const [key, setKey] = useState('');
  const action = useAction(async () => {
    if (!key.trim()) throw new Error('Paste an API key (it starts with pk_).');
    onSignedIn(await signIn(key.trim()));
  });
  const problem = action.error instanceof ApiError && action.error.status === 401
    ? new Error(`That API key was not accepted (${action.error.message}). Check it and paste it again; npm start prints the first key.`)
    : action.error;
  useEffect(() => { document.title = 'Sign in · Parley console'; }, []);
  return (
    <main class="signin">
      <h1>Parley console</h1>
      <p>Sign in with one of your team's API keys. It stays in this browser tab only and is forgotten when you sign out or close the tab.</p>
      <Form error={null} onSubmit={() => action.run()} label="Sign in">
        <TextField label="API key" name="api_key" type="password" autoComplete="off" value={key} onInput={setKey} />
        <button type="submit" class="primary" disabled={action.pending}>Sign in</button>
        <Problem error={problem} />
      </Form>
    </main>
  );
}

function Shell({ team, onSignOut }: { team: Team; onSignOut: () => void }) {
  const { path } = useLocation();
  return (
    <>
      <a class="skip" href="#main">Skip to content</a>
      <header class="top">
        <a class="brand" href="/agents">Parley</a>
        <nav aria-label="Main">
          <ul>
            {NAV.map(([href, label]) => (
              <li key={href}><a href={href} aria-current={path === href || path.startsWith(`${href}/`) ? 'page' : undefined}>{label}</a></li>
            ))}
          </ul>
        </nav>
        <div class="who">
          <span class="muted">{team.name}</span>
          <button type="button" onClick={onSignOut}>Sign out</button>
        </div>
      </header>
      <main id="main" tabIndex={-1}>
        <ErrorBoundary>
          <Router>
            <Route path="/" component={Redirect} />
            <Route path="/agents" component={Agents} />
            <Route path="/agents/:id" component={AgentPage} />
            <Route path="/agents/:id/test" component={TestCall} />
            <Route path="/sessions" component={Sessions} />
            <Route path="/sessions/:id" component={SessionPage} />
            <Route path="/tools" component={Tools} />
            <Route path="/tools/:id" component={ToolPage} />
            <Route path="/knowledge" component={Knowledge} />
            <Route path="/phone-numbers" component={PhoneNumbers} />
            <Route path="/speech" component={Speech} />
            <Route path="/usage" component={Usage} />
            <Route default component={NotFound} />
          </Router>
        </ErrorBoundary>
      </main>
    </>
  );
}

function Redirect() {
  const { route } = useLocation();
  useEffect(() => route('/agents', true), []);
  return null;
}

function NotFound() {
  return (
    <>
      <h1>Page not found</h1>
      <p>There is no console page at this address. <a href="/agents">Go to your agents</a>.</p>
    </>
  );
}

/** Sets the tab title for a page. */
export function useTitle(title: string) {
  useEffect(() => { document.title = `${title} · Parley console`; }, [title]);
}
