// The listed bodies a starting bridge keeps for its first announcements, for all its resources
// together, off the JavaScript heap. At 100,000 objects the index alone takes ~85 MiB of the
// bridge's 128 MiB old space, so bodies kept there as strings (~280 bytes a Greeting) could not
// all fit; here they are bytes in a few large Buffers, and the heap holds a number per body.
//
// Bodies are appended to chunks and never moved: a chunk is freed once every body in it is
// taken. A starting bridge keeps bodies while it lists and takes them as it announces, in about
// the same order, so chunks empty in turn.

const DEFAULT_CHUNK_BYTES = 256 * 1024;
/** A handle packs offset and length, each within 2^18, and a slot within 2^17: 53 bits, one safe integer. */
const FIELD = 2 ** 18;
const SLOTS = 2 ** 17;

interface Chunk {
  readonly bytes: Buffer;
  used: number;
  live: number;
}

export class KeptBodies {
  /** Bytes of chunks held at most: the memory bound, whatever the number of resources. */
  readonly limit: number;
  readonly #chunkBytes: number;
  readonly #chunks: Array<Chunk | undefined>;
  #current: number | undefined;

  constructor(limit: number, chunkBytes = DEFAULT_CHUNK_BYTES) {
    this.limit = limit;
    this.#chunkBytes = Math.min(chunkBytes, limit, FIELD - 1);
    this.#chunks = new Array<Chunk | undefined>(this.#chunkBytes === 0 ? 0 : Math.min(Math.floor(limit / this.#chunkBytes), SLOTS)).fill(undefined);
  }

  /** Bytes of chunks held now. */
  get bytes(): number {
    return this.#chunks.reduce((n, c) => n + (c?.bytes.length ?? 0), 0);
  }

  /** Keeps `json` if it fits; its handle, or undefined. */
  keep(json: string): number | undefined {
    const length = Buffer.byteLength(json, "utf8");
    if (length === 0 || length > this.#chunkBytes) return undefined;
    let slot = this.#current;
    if (slot === undefined || this.#chunks[slot]!.used + length > this.#chunkBytes) {
      slot = this.#chunks.indexOf(undefined);
      if (slot < 0) return undefined;
      this.#chunks[slot] = { bytes: Buffer.allocUnsafeSlow(this.#chunkBytes), used: 0, live: 0 };
      this.#current = slot;
    }
    const chunk = this.#chunks[slot]!;
    const offset = chunk.used;
    chunk.bytes.write(json, offset, "utf8");
    chunk.used += length;
    chunk.live++;
    return (slot * FIELD + offset) * FIELD + length;
  }

  /** The body behind `handle`, which is given up. */
  take(handle: number): string {
    const { chunk, slot, offset, length } = this.#open(handle);
    const json = chunk.bytes.toString("utf8", offset, offset + length);
    this.#free(chunk, slot);
    return json;
  }

  /** Gives up `handle` unread. */
  drop(handle: number): void {
    const { chunk, slot } = this.#open(handle);
    this.#free(chunk, slot);
  }

  #open(handle: number): { chunk: Chunk; slot: number; offset: number; length: number } {
    const length = handle % FIELD;
    const rest = (handle - length) / FIELD;
    const offset = rest % FIELD;
    const slot = (rest - offset) / FIELD;
    const chunk = this.#chunks[slot];
    if (chunk === undefined) throw new Error(`kept body ${handle} is not held`);
    return { chunk, slot, offset, length };
  }

  #free(chunk: Chunk, slot: number): void {
    if (--chunk.live > 0) return;
    this.#chunks[slot] = undefined;
    if (slot === this.#current) this.#current = undefined;
  }
}
