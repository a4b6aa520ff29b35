// Plain GETs against the API server with the KubeConfig's credentials. The generated client's
// Watch pushes lines through a callback, so it cannot be paused; reading the response stream
// ourselves lets a full publish buffer stop the watch at the TCP level (backpressure).
import http from "node:http";
import https from "node:https";
import type { KubeConfig } from "@kubernetes/client-node";

/** The API server answered with an error status (or a watch ERROR event carried one). */
export class KubeHttpError extends Error {
  override name = "KubeHttpError";
  readonly status: number;
  constructor(status: number, message: string) {
    super(message);
    this.status = status;
  }
}

export interface WatchEvent {
  type: "ADDED" | "MODIFIED" | "DELETED" | "BOOKMARK" | "ERROR";
  object: unknown;
}

function statusMessage(status: number, body: string): string {
  try {
    const parsed = JSON.parse(body) as { message?: unknown };
    if (typeof parsed.message === "string") return parsed.message;
  } catch {
    // not a Status object; fall through
  }
  return `HTTP ${status}`;
}

export class KubeHttp {
  readonly #kc: KubeConfig;
  constructor(kc: KubeConfig) {
    this.#kc = kc;
  }

  async #request(path: string, query: Record<string, string | undefined>, signal: AbortSignal): Promise<{ req: http.ClientRequest; res: http.IncomingMessage }> {
    const server = this.#kc.getCurrentCluster()?.server;
    if (server === undefined) throw new Error("the kubeconfig has no current cluster");
    const url = new URL(server.replace(/\/$/, "") + path);
    for (const [k, v] of Object.entries(query)) if (v !== undefined && v !== "") url.searchParams.set(k, v);
    const opts: https.RequestOptions = { method: "GET", headers: { Accept: "application/json" } };
    await this.#kc.applyToHTTPSOptions(opts);
    signal.throwIfAborted();
    const plain = url.protocol === "http:";
    // A plain-HTTP server (kubectl proxy) cannot use the kubeconfig's TLS agent.
    if (plain) delete opts.agent;
    const lib = plain ? http : https;
    return new Promise((resolve, reject) => {
      const req = lib.request(url, { ...opts, signal }, (res) => resolve({ req, res }));
      req.on("error", reject);
      req.setTimeout(30_000, () => req.destroy(new Error(`no response from the API server in 30 s (${path})`)));
      req.end();
    });
  }

  async #failIfNotOk(res: http.IncomingMessage): Promise<void> {
    if (res.statusCode === 200) return;
    let body = "";
    for await (const chunk of res) body += String(chunk);
    throw new KubeHttpError(res.statusCode ?? 0, statusMessage(res.statusCode ?? 0, body));
  }

  async getJson(path: string, query: Record<string, string | undefined>, signal: AbortSignal): Promise<unknown> {
    const { res } = await this.#request(path, query, signal);
    await this.#failIfNotOk(res);
    const chunks: Buffer[] = [];
    for await (const chunk of res) chunks.push(chunk as Buffer);
    return JSON.parse(Buffer.concat(chunks).toString("utf8"));
  }

  /**
   * Streams watch events. The next chunk is read only when the consumer asks for the next
   * event, so a slow consumer pauses the stream. `silenceMs` counts only time spent waiting on
   * the server, never time the consumer spends paused.
   */
  async *watch(path: string, query: Record<string, string | undefined>, signal: AbortSignal, silenceMs: number): AsyncGenerator<WatchEvent> {
    const { req, res } = await this.#request(path, { ...query, watch: "true" }, signal);
    try {
      await this.#failIfNotOk(res);
      req.setTimeout(0);
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
          throw silent ? new Error(`watch silent for ${silenceMs} ms`) : e;
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
}
