import type { CharAt } from './types.ts';

const REPLACEMENT = '\uFFFD';

/** Incremental UTF-8 decoder that keeps where each character's bytes lie in the audio. */
export class Utf8Chars {
  private cp = 0;
  private need = 0;
  private start = 0;
  private lastEnd = 0;

  /** Adds one byte decoded from the symbol spanning [start, end); completed chars go to `out`. */
  push(byte: number, start: number, end: number, out: CharAt[]): void {
    if (this.need > 0) {
      if ((byte & 0xc0) === 0x80) {
        this.cp = (this.cp << 6) | (byte & 0x3f);
        this.lastEnd = end;
        if (--this.need === 0) out.push({ text: fromCodePoint(this.cp), start: this.start, end });
        return;
      }
      out.push({ text: REPLACEMENT, start: this.start, end: this.lastEnd });
      this.need = 0;
    }
    this.start = start;
    this.lastEnd = end;
    if (byte < 0x80) out.push({ text: String.fromCharCode(byte), start, end });
    else if (byte >= 0xc2 && byte < 0xe0) this.begin(byte & 0x1f, 1);
    else if (byte >= 0xe0 && byte < 0xf0) this.begin(byte & 0x0f, 2);
    else if (byte >= 0xf0 && byte < 0xf5) this.begin(byte & 0x07, 3);
    else out.push({ text: REPLACEMENT, start, end });
  }

  /** Ends the byte stream: an unfinished character becomes U+FFFD. */
  flush(out: CharAt[]): void {
    if (this.need > 0) out.push({ text: REPLACEMENT, start: this.start, end: this.lastEnd });
    this.need = 0;
  }

  private begin(bits: number, need: number): void {
    this.cp = bits;
    this.need = need;
  }
}

function fromCodePoint(cp: number): string {
  return cp > 0x10ffff || (cp >= 0xd800 && cp < 0xe000) ? REPLACEMENT : String.fromCodePoint(cp);
}
