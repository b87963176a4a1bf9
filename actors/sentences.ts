/** Text up to the last sentence end followed by whitespace, and the rest. */
export function cutSentences(buffer: string): [string, string] {
  const re = /[.!?。！？…\n]+["')\]」』]*\s+/gu;
  let end = -1;
  for (const m of buffer.matchAll(re)) end = m.index! + m[0].length;
  return end < 0 ? ['', buffer] : [buffer.slice(0, end), buffer.slice(end)];
}
