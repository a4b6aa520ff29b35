// EKS IAM authentication, as aws-iam-authenticator does it: a presigned STS GetCallerIdentity
// URL with the cluster name signed in as the x-k8s-aws-id header, base64url-encoded behind the
// "k8s-aws-v1." prefix. EKS honours a token for 15 minutes; we re-sign well before that.
import { SignatureV4 } from "@smithy/signature-v4";
import type { AwsCredentialIdentity, AwsCredentialIdentityProvider, Checksum, SourceData } from "@smithy/types";
import { createHash, createHmac, type Hash, type Hmac } from "node:crypto";

export const EKS_TOKEN_PREFIX = "k8s-aws-v1.";
/** Re-sign after this long: under EKS's 15-minute limit with room for clock skew. */
export const EKS_TOKEN_TTL_MS = 10 * 60 * 1000;
/** STS wants the presigned URL used within this many seconds of signing; EKS allows 15 minutes. */
const PRESIGN_EXPIRES_SECONDS = 60;

export interface EksTokenOptions {
  clusterName: string;
  region: string;
  credentials: AwsCredentialIdentity | AwsCredentialIdentityProvider;
  clock: () => Date;
}

export async function signEksToken(signing: EksTokenOptions): Promise<string> {
  const hostname = `sts.${signing.region}.amazonaws.com`;
  const signer = new SignatureV4({ service: "sts", region: signing.region, credentials: signing.credentials, sha256: NodeSha256 });
  const signed = await signer.presign(
    {
      method: "GET",
      protocol: "https:",
      hostname,
      path: "/",
      query: { Action: "GetCallerIdentity", Version: "2011-06-15" },
      headers: { host: hostname, "x-k8s-aws-id": signing.clusterName },
    },
    { expiresIn: PRESIGN_EXPIRES_SECONDS, signingDate: signing.clock() },
  );
  const query = new URLSearchParams();
  for (const [k, v] of Object.entries(signed.query ?? {})) for (const one of [v].flat()) if (one !== null) query.append(k, one);
  const url = `https://${hostname}/?${query.toString()}`;
  return EKS_TOKEN_PREFIX + Buffer.from(url, "utf8").toString("base64url");
}

/** A token provider that signs once per TTL and shares one signing among concurrent callers. */
export function eksTokenProvider(signing: EksTokenOptions, ttlMs = EKS_TOKEN_TTL_MS): () => Promise<string> {
  let cached: { token: Promise<string>; at: number } | undefined;
  return () => {
    const now = signing.clock().getTime();
    if (!cached || now - cached.at >= ttlMs) {
      const token = signEksToken(signing);
      cached = { token, at: now };
      // A failed signing must not be cached.
      token.catch(() => {
        if (cached?.token === token) cached = undefined;
      });
    }
    return cached.token;
  };
}

// SHA-256 / HMAC-SHA-256 for @smithy/signature-v4, from node:crypto (no extra dependency).
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
