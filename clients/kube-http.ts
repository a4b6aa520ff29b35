// The one HTTP client to the API server, for the bridge and the functions alike: JSON requests
// and a watch stream, over a KubeConnection (a kubeconfig, the pod's ServiceAccount, a server and
// token) and optionally a token provider that overrides its credential (EKS IAM tokens).
// The generated client's Watch pushes lines through a callback, so it cannot be paused; reading
// the response stream ourselves lets a slow consumer stop the watch at the TCP level (backpressure).
import http from "node:http";
import https from "node:https";
import { SpanKind, SpanStatusCode, type Context, type Span, type Tracer } from "@opentelemetry/api";
import type { KubeConnection } from "./kube-connection.ts";
import { ApiError, ApiNotReady, KubeUnreachable, unreachableKindOf } from "./kube-errors.ts";
import { ServerReadiness, type ReadyzAnswer } from "./server-readiness.ts";
import { fieldsOf, type TraceFields } from "./tracing.ts";

export { ApiError, ApiNotReady, KubeUnreachable, isServerOutage } from "./kube-errors.ts";

/** How long a request waits for the server by default: past it, the server is taken to be unavailable. */
export const DEFAULT_REQUEST_TIMEOUT_MS = 15_000;

export interface KubeAccess {
  connection: KubeConnection;
  /** When set, its bearer token replaces whatever the kubeconfig's user would send. */
  token?: () => Promise<string>;
  /** How long a request may wait for the server (a watch: only for its response headers). Default DEFAULT_REQUEST_TIMEOUT_MS. */
  timeoutMs?: number;
  /** For the window after the server's return (server-readiness.ts). Default Date.now. */
  now?: () => number;
}

export interface WatchEvent {
  type: "ADDED" | "MODIFIED" | "DELETED" | "BOOKMARK" | "ERROR";
  object: unknown;
}

export type Query = Record<string, string | undefined>;

export interface RequestOptions {
  /** Empty and undefined values are left out. */
  query?: Query;
  body?: unknown;
  /** Of the body. Default application/json. */
  contentType?: string;
  /** What to answer with. Default application/json (a metadata-only list or watch asks for PartialObjectMetadata). */
  accept?: string;
  signal?: AbortSignal;
  /** The span the request belongs under: with a tracer given, it is a span of its own there. */
  trace?: RequestTrace;
}

/** Where a request sits in a change's trace. */
export interface RequestTrace {
  parent: Context;
  /** The caller's attempt (a reconcile re-run after a 409): crdfn.attempt on the request's span. */
  attempt?: number;
}

export interface KubeHttpOptions {
  /** Spans for the requests that say where they belong (RequestOptions.trace); none without. */
  tracer?: Tracer;
}

export class KubeHttp {
  readonly #access: KubeAccess;
  readonly #server: URL;
  readonly #timeoutMs: number;
  // One keep-alive agent per client: a warm function and a relisting bridge reuse their TLS connection.
  readonly #agent: http.Agent;
  readonly #readiness: ServerReadiness;
  readonly #tracer: Tracer | undefined;

  constructor(access: KubeAccess, options: KubeHttpOptions = {}) {
    const server = access.connection.getCurrentCluster()?.server;
    if (server === undefined) throw new Error("the kubeconfig has no current cluster");
    this.#access = access;
    this.#tracer = options.tracer;
    this.#server = new URL(server);
    this.#timeoutMs = access.timeoutMs ?? DEFAULT_REQUEST_TIMEOUT_MS;
    this.#agent = this.#plain ? new http.Agent({ keepAlive: true }) : new https.Agent({ keepAlive: true });
    this.#readiness = new ServerReadiness({ anonymous: () => this.#readyz(false), authenticated: () => this.#readyz(true), now: access.now ?? Date.now });
  }

  /** A plain-HTTP server (kubectl proxy) cannot use TLS. */
  get #plain(): boolean {
    return this.#server.protocol === "http:";
  }

  /** The status and body of the answer, whatever the status. */
  async request(method: string, path: string, o: RequestOptions = {}): Promise<{ status: number; text: string }> {
    if (this.#tracer === undefined || o.trace === undefined) {
      const { res } = await this.#open(method, path, o);
      return { status: res.statusCode ?? 0, text: await this.#readText(res, method, path) };
    }
    const span = requestSpan(this.#tracer, method, path, o.trace);
    try {
      // The API server (its tracing configured, KEP-647) continues the trace from these headers.
      const { res } = await this.#open(method, path, o, fieldsOf(span));
      const status = res.statusCode ?? 0;
      const text = await this.#readText(res, method, path);
      span.setAttribute("http.response.status_code", status);
      if (status >= 400) {
        span.setAttribute("error.type", String(status));
        span.setStatus({ code: SpanStatusCode.ERROR, message: `${status} ${reasonOf(text)}` });
      }
      return { status, text };
    } catch (e) {
      span.setAttribute("error.type", e instanceof KubeUnreachable ? e.kind : ((e as Error).name ?? "Error"));
      span.setStatus({ code: SpanStatusCode.ERROR, message: (e as Error).message });
      throw e;
    } finally {
      span.end();
    }
  }

  /**
   * The parsed JSON body of a 2xx answer; any other status throws ApiError (ApiNotReady for a
   * 401/403 while the server is not ready), no answer KubeUnreachable.
   */
  async json(method: string, path: string, o: RequestOptions = {}): Promise<unknown> {
    const { status, text } = await this.request(method, path, o);
    if (!isOk(status)) throw await this.#refusal(apiError(method, path, status, text));
    return JSON.parse(text);
  }

  getJson(path: string, query: Query, signal?: AbortSignal, accept?: string): Promise<unknown> {
    return this.json("GET", path, { query, signal, ...(accept === undefined ? {} : { accept }) });
  }

  /**
   * Streams watch events. The next chunk is read only when the consumer asks for the next
   * event, so a slow consumer pauses the stream. `silenceMs` counts only time spent waiting on
   * the server, never time the consumer spends paused.
   */
  async *watch(path: string, query: Query, signal: AbortSignal, silenceMs: number, accept?: string): AsyncGenerator<WatchEvent> {
    const { req, res } = await this.#open("GET", path, { query: { ...query, watch: "true" }, signal, ...(accept === undefined ? {} : { accept }) });
    try {
      if (!isOk(res.statusCode ?? 0)) throw await this.#refusal(apiError("GET", path, res.statusCode ?? 0, await this.#readText(res, "GET", path)));
      req.setTimeout(0); // from here on, silence decides
      res.setEncoding("utf8"); // decodes characters split across chunks correctly
      const chunks = res[Symbol.asyncIterator]() as AsyncIterator<string>;
      let rest = "";
      for (;;) {
        let silent = false;
        const timer = setTimeout(() => {
          silent = true;
          req.destroy();
        }, silenceMs);
        let next: IteratorResult<string>;
        try {
          next = await chunks.next();
        } catch (e) {
          if (silent) throw new KubeUnreachable("silent", `GET ${path}: watch silent for ${silenceMs} ms`);
          throw this.#unreachable(e, "GET", path);
        } finally {
          clearTimeout(timer);
        }
        if (next.done === true) return;
        const lines = (rest + next.value).split("\n");
        rest = lines.pop() ?? "";
        for (const line of lines) if (line.trim() !== "") yield JSON.parse(line) as WatchEvent;
      }
    } finally {
      req.destroy();
    }
  }

  async #open(method: string, path: string, o: RequestOptions, traceHeaders?: TraceFields): Promise<{ req: http.ClientRequest; res: http.IncomingMessage }> {
    const url = new URL(this.#server.pathname.replace(/\/$/, "") + path, this.#server);
    for (const [k, v] of Object.entries(o.query ?? {})) if (v !== undefined && v !== "") url.searchParams.set(k, v);
    const options: https.RequestOptions = { method, headers: { accept: o.accept ?? "application/json" } };
    await this.#access.connection.applyToHTTPSOptions(options);
    // client-node sets a fresh, non-keep-alive agent per request: a TLS handshake per API call,
    // about a third of a busy function's CPU. Ours still gets the TLS material from `options`.
    options.agent = this.#agent;
    const headers = (options.headers ?? {}) as Record<string, string>;
    if (this.#access.token) headers.Authorization = `Bearer ${await this.#access.token()}`;
    if (traceHeaders) Object.assign(headers, traceHeaders);
    const payload = o.body === undefined ? undefined : JSON.stringify(o.body);
    if (payload !== undefined) {
      headers["content-type"] = o.contentType ?? "application/json";
      headers["content-length"] = String(Buffer.byteLength(payload));
    }
    options.headers = headers;
    o.signal?.throwIfAborted();
    const lib = this.#plain ? http : https;
    const timeoutMs = this.#timeoutMs;
    return new Promise((resolve, reject) => {
      const req = lib.request(url, { ...options, ...(o.signal ? { signal: o.signal } : {}) }, (res) => {
        this.#readiness.sawAnswer();
        resolve({ req, res });
      });
      req.on("error", (e) => reject(this.#unreachable(e, method, path)));
      req.setTimeout(timeoutMs, () => req.destroy(new KubeUnreachable("timeout", `${method} ${path}: no answer from the API server in ${timeoutMs} ms`)));
      req.end(payload);
    });
  }

  /** A transport failure as KubeUnreachable (noted for the readiness window); anything else (an abort, a TLS error) as it is. */
  #unreachable(e: unknown, method: string, path: string): Error {
    if (e instanceof KubeUnreachable) {
      this.#readiness.sawUnreachable();
      return e;
    }
    const kind = unreachableKindOf(e);
    if (kind === undefined) return e instanceof Error ? e : new Error(String(e));
    this.#readiness.sawUnreachable();
    return new KubeUnreachable(kind, `${method} ${path}: the API server did not answer (${(e as Error).message})`, { cause: e });
  }

  async #readText(res: http.IncomingMessage, method: string, path: string): Promise<string> {
    try {
      return await readText(res);
    } catch (e) {
      throw this.#unreachable(e, method, path);
    }
  }

  /** A 401/403 from a server that is not ready is an outage (ApiNotReady); any other error stands. */
  async #refusal(e: ApiError): Promise<ApiError> {
    if (e.code !== 401 && e.code !== 403) return e;
    const why = await this.#readiness.notReadyReason();
    return why === undefined ? e : new ApiNotReady(e, why);
  }

  /** GET /readyz, anonymously or with the client's credential: its status, or "unreachable". */
  async #readyz(withCredential: boolean): Promise<ReadyzAnswer> {
    const url = new URL(this.#server.pathname.replace(/\/$/, "") + "/readyz", this.#server);
    const options: https.RequestOptions = { method: "GET", headers: {} };
    await this.#access.connection.applyToHTTPSOptions(options);
    const headers = (options.headers ?? {}) as Record<string, string>;
    if (withCredential) {
      if (this.#access.token) headers.Authorization = `Bearer ${await this.#access.token()}`;
    } else {
      // Only what proves the server's identity (its CA) is kept.
      delete headers.Authorization;
      delete headers.authorization;
      delete options.cert;
      delete options.key;
      delete options.pfx;
      delete options.passphrase;
    }
    options.headers = headers;
    options.agent = false;
    const lib = this.#plain ? http : https;
    const timeoutMs = Math.min(this.#timeoutMs, 5000);
    return new Promise((resolve) => {
      const req = lib.request(url, options, (res) => {
        res.resume();
        resolve(res.statusCode ?? 0);
      });
      req.on("error", () => resolve("unreachable"));
      req.setTimeout(timeoutMs, () => req.destroy());
      req.end();
    });
  }
}

const isOk = (status: number): boolean => status >= 200 && status < 300;

/**
 * A request's span, named as the API server's own audit names it (`kube PATCH configmaps`): the
 * resource of a REST path (/api/v1/namespaces/a/configmaps/b, /apis/g/v1/greetings/x/status).
 */
function requestSpan(tracer: Tracer, method: string, path: string, at: RequestTrace): Span {
  const { resource, subresource } = resourceOf(path);
  return tracer.startSpan(
    `kube ${method} ${resource}`,
    {
      kind: SpanKind.CLIENT,
      attributes: {
        "http.request.method": method,
        "url.path": path,
        ...(subresource === undefined ? {} : { "k8s.subresource": subresource }),
        ...(at.attempt === undefined ? {} : { "crdfn.attempt": at.attempt }),
      },
    },
    at.parent,
  );
}

/** The resource (and subresource) a REST path names; the path's last segment when it names none. */
export function resourceOf(path: string): { resource: string; subresource?: string } {
  const parts = path
    .split("?")[0]!
    .split("/")
    .filter((p) => p !== "");
  const versioned = parts[0] === "api" ? parts.slice(2) : parts[0] === "apis" ? parts.slice(3) : undefined;
  if (versioned === undefined || versioned.length === 0) return { resource: parts.at(-1) ?? "/" };
  // namespaces/<ns>/<resource>…, except the namespaces themselves (namespaces, namespaces/<ns>[/status]).
  const rest =
    versioned[0] === "namespaces" && versioned.length >= 3 && versioned[2] !== "status" && versioned[2] !== "finalize" ? versioned.slice(2) : versioned;
  return { resource: rest[0]!, ...(rest[2] === undefined ? {} : { subresource: rest[2] }) };
}

/** The reason of a Status body ("Conflict"), for a span's status message. */
function reasonOf(text: string): string {
  try {
    const reason = (JSON.parse(text) as { reason?: unknown }).reason;
    return typeof reason === "string" ? reason : "";
  } catch {
    return "";
  }
}

async function readText(res: http.IncomingMessage): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of res) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString("utf8");
}

/** The error for a failed request, with the reason and message of the server's Status when it sent one. */
function apiError(method: string, path: string, status: number, body: string): ApiError {
  let reason = "Unknown";
  let message = body.slice(0, 500) || `HTTP ${status}`;
  try {
    const s = JSON.parse(body) as { reason?: unknown; message?: unknown };
    if (typeof s.reason === "string") reason = s.reason;
    if (typeof s.message === "string") message = s.message;
  } catch {
    // not a Status object; keep the raw text
  }
  return new ApiError(status, reason, `${method} ${path}: ${status} ${message}`);
}
