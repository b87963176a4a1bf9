/**
 * Cuts a byte stream into base64 pieces that concatenate: every piece but the last covers a
 * multiple of 3 bytes, so joining the strings gives the base64 of the whole audio and each
 * piece also decodes on its own.
 */
export class Base64Pieces {
  private rest: Buffer = Buffer.alloc(0);

  /** The base64 of what can be sent now ('' when under 3 bytes are pending). */
  push(bytes: Uint8Array): string {
    const all = this.rest.length ? Buffer.concat([this.rest, bytes]) : Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
    const cut = all.length - (all.length % 3);
    this.rest = Buffer.from(all.subarray(cut));
    return all.subarray(0, cut).toString('base64');
  }

  /** The base64 of the last bytes (with padding). */
  end(): string {
    const out = this.rest.toString('base64');
    this.rest = Buffer.alloc(0);
    return out;
  }
}
