// GKE authentication from a Cloud Run function: the OAuth access token of the function's own
// service account, from the metadata server every Google runtime serves (Cloud Run, GKE, GCE).
// GKE accepts it as the user <service account email>; RBAC then grants what the function may do
// (deploy/gcp.ts binds the function's Roles to that user). Tokens live an hour; one is
// kept until a minute before it expires. Written by hand: google-auth-library would do the
// same GET and bring ~2 MiB to every cold start.
import { z } from "zod";

/** The metadata server's host, as Google's client libraries let GCE_METADATA_HOST override it. */
export const DEFAULT_METADATA_HOST = "metadata.google.internal";
const REFRESH_MARGIN_MS = 60_000;

const tokenSchema = z.object({ access_token: z.string().min(1), expires_in: z.number().positive(), token_type: z.string().optional() });

export interface GkeTokenOptions {
  clock: () => Date;
  /** host[:port]; default GCE_METADATA_HOST, else metadata.google.internal. */
  metadataHost?: string;
  fetch?: typeof fetch;
}

/** A token source: cached, refreshed a minute before expiry, one request at a time. */
export function gkeTokenProvider(source: GkeTokenOptions): () => Promise<string> {
  const host = source.metadataHost ?? DEFAULT_METADATA_HOST;
  const get = source.fetch ?? fetch;
  let cached: { token: string; until: number } | undefined;
  let inFlight: Promise<string> | undefined;
  const refresh = async (): Promise<string> => {
    const url = `http://${host}/computeMetadata/v1/instance/service-accounts/default/token`;
    let res: Response;
    try {
      res = await get(url, { headers: { "Metadata-Flavor": "Google" }, signal: AbortSignal.timeout(5000) });
    } catch (e) {
      // Unreachable or slow: an outage of the infrastructure, not the object's fault (outcome.ts
      // reads the network code, a timeout as ETIMEDOUT), so the circuit opens and nothing is dead-lettered.
      const timedOut = (e as Error).name === "TimeoutError";
      const code = timedOut ? "ETIMEDOUT" : (e as { cause?: { code?: unknown } }).cause?.code;
      const err = new Error(
        `gke authentication: the metadata server ${host} ${timedOut ? "timed out" : `did not answer (${(e as Error).message})`}; the function must run on Google Cloud (Cloud Run, GKE) or set GCE_METADATA_HOST`,
        { cause: e },
      );
      if (typeof code === "string") Object.assign(err, { code });
      throw err;
    }
    if (!res.ok) throw new Error(`gke authentication: the metadata server answered ${res.status} for the service account's token`);
    const parsed = tokenSchema.safeParse(await res.json().catch(() => undefined));
    if (!parsed.success) throw new Error("gke authentication: the metadata server's token answer is not an access token");
    cached = { token: parsed.data.access_token, until: source.clock().getTime() + parsed.data.expires_in * 1000 - REFRESH_MARGIN_MS };
    return cached.token;
  };
  return () => {
    if (cached && source.clock().getTime() < cached.until) return Promise.resolve(cached.token);
    return (inFlight ??= refresh().finally(() => (inFlight = undefined)));
  };
}
