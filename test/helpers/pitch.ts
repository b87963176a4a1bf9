/**
 * Median fundamental frequency of the voiced 30 ms frames, by autocorrelation over 60–500 Hz:
 * what a listener hears as a voice's pitch (tests of voice design compare voices by it).
 */
export function medianF0(pcm: Int16Array, rateHz: number): number {
  const frame = Math.round(rateHz * 0.03);
  const minLag = Math.floor(rateHz / 500);
  const maxLag = Math.ceil(rateHz / 60);
  const f0s: number[] = [];
  for (let at = 0; at + frame + maxLag < pcm.length; at += frame) {
    let energy = 0;
    for (let i = 0; i < frame; i++) energy += pcm[at + i]! * pcm[at + i]!;
    if (energy / frame < 1000 * 1000) continue; // silence and quiet consonants
    const corr = new Float64Array(maxLag + 1);
    let best = 0;
    for (let lag = minLag; lag <= maxLag; lag++) {
      let c = 0;
      for (let i = 0; i < frame; i++) c += pcm[at + i]! * pcm[at + i + lag]!;
      corr[lag] = c;
      best = Math.max(best, c);
    }
    // The period, not a multiple of it: the shortest lag whose correlation is near the best
    // (a steady voice correlates almost as well at two or three periods).
    let bestLag = 0;
    for (let lag = minLag; lag <= maxLag && !bestLag; lag++) {
      if (corr[lag]! >= best * 0.9 && corr[lag]! >= corr[lag - 1]! && corr[lag]! >= (corr[lag + 1] ?? 0)) bestLag = lag;
    }
    if (bestLag && best / energy > 0.5) f0s.push(rateHz / bestLag);
  }
  f0s.sort((a, b) => a - b);
  return f0s[Math.floor(f0s.length / 2)] ?? 0;
}
