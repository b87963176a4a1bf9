import t from 'tap';
import { roundTrip } from './roundtrip.ts';

// 200 sentences through a codec take tens of seconds; more on a loaded machine.
t.setTimeout(600_000);

t.test('synthetic speech → Transcribe is exact (raw)', (t) => roundTrip(t, 'raw'));
