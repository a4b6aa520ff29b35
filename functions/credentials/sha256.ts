// SHA-256 / HMAC-SHA-256 for @smithy/signature-v4, from node:crypto (no extra dependency).
import { createHash, createHmac, type Hash, type Hmac } from "node:crypto";
import type { Checksum, SourceData } from "@smithy/types";

const bytes = (data: SourceData): Uint8Array =>
  typeof data === "string"
    ? Buffer.from(data, "utf8")
    : ArrayBuffer.isView(data)
      ? new Uint8Array(data.buffer, data.byteOffset, data.byteLength)
      : new Uint8Array(data);

export class NodeSha256 implements Checksum {
  private readonly secret: SourceData | undefined;
  private hash: Hash | Hmac;
  constructor(secret?: SourceData) {
    this.secret = secret;
    this.hash = this.fresh();
  }
  update(data: Uint8Array): void {
    this.hash.update(data);
  }
  digest(): Promise<Uint8Array> {
    return Promise.resolve(new Uint8Array(this.hash.digest()));
  }
  reset(): void {
    this.hash = this.fresh();
  }
  private fresh(): Hash | Hmac {
    return this.secret === undefined ? createHash("sha256") : createHmac("sha256", bytes(this.secret));
  }
}
