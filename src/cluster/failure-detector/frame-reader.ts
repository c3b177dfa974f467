// Cuts a byte stream into detector frames: one message per line, none longer than MAX_FRAME_BYTES,
// so a peer that never sends a newline cannot make the reader hold an unbounded buffer.
import { StringDecoder } from 'node:string_decoder';
import { MAX_FRAME_BYTES } from './messages.js';

export type FrameChunk = { readonly kind: 'frame'; readonly text: string } | { readonly kind: 'too-large'; readonly bytes: number };

export class FrameReader {
  // A decoder keeps a UTF-8 character cut between two chunks whole.
  private readonly decoder = new StringDecoder('utf8');
  private pending = '';
  private overflowed = false;

  /** The frames `bytes` completes, in order; `too-large` once, after which the reader yields nothing more. */
  push(bytes: Buffer): FrameChunk[] {
    if (this.overflowed) return [];
    this.pending += this.decoder.write(bytes);
    const out: FrameChunk[] = [];
    for (let nl = this.pending.indexOf('\n'); nl >= 0; nl = this.pending.indexOf('\n')) {
      const text = this.pending.slice(0, nl);
      this.pending = this.pending.slice(nl + 1);
      // A frame is at most MAX_FRAME_BYTES with its newline: parseFrame refuses it by its bytes.
      out.push({ kind: 'frame', text });
    }
    // UTF-8 needs at least as many bytes as characters: only a long remainder is worth measuring.
    if (this.pending.length >= MAX_FRAME_BYTES) {
      const bytes = Buffer.byteLength(this.pending, 'utf8');
      if (bytes >= MAX_FRAME_BYTES) {
        this.overflowed = true;
        this.pending = '';
        out.push({ kind: 'too-large', bytes });
      }
    }
    return out;
  }
}
