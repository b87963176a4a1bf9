/** The console's entry: renders the app into #app (scripts/build.mjs bundles from here). */
import { render } from 'preact';
import { App } from './app.tsx';
import './styles.css';

render(<App />, document.getElementById('app')!);
