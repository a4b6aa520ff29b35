// Requests the API server has served, from its own counter (apiserver_request_total), by verb and
// resource: the difference between two scrapes is what everyone asked of it in between; and the
// time it spent on them (apiserver_request_duration_seconds_sum, same keys), which tells how much
// of a change's latency is the server's own. And the watches it holds open now
// (apiserver_longrunning_requests, verb WATCH; v1.34 has no apiserver_registered_watchers), by
// resource.
import type { KubeConfig } from "@kubernetes/client-node";
import { kube } from "../../test/support/kube-requests.ts";

/** "VERB resource[/subresource]" → requests. */
export type RequestCounts = Record<string, number>;

const TOTAL = "apiserver_request_total";
const SECONDS = "apiserver_request_duration_seconds_sum";
const LABEL = /(\w+)="([^"]*)"/g;

const WATCHES = /^apiserver_longrunning_requests\{([^}]*)\} (\S+)$/;

const labelsOf = (text: string): Map<string, string> => new Map([...text.matchAll(LABEL)].map((l): [string, string] => [l[1] ?? "", l[2] ?? ""]));

/** Sums apiserver_request_total over codes and scopes, by verb and (sub)resource. */
export const parseRequestCounts = (metrics: string): RequestCounts => parseByRequest(metrics, TOTAL);

/** The seconds the API server spent serving requests, summed the same way. */
export const parseRequestSeconds = (metrics: string): RequestCounts => parseByRequest(metrics, SECONDS);

function parseByRequest(metrics: string, name: string): RequestCounts {
  const out: RequestCounts = {};
  const prefix = `${name}{`;
  for (const line of metrics.split("\n")) {
    if (!line.startsWith(prefix)) continue;
    const m = /^[^{]+\{([^}]*)\} (\S+)$/.exec(line);
    if (!m) continue;
    const labels = labelsOf(m[1] ?? "");
    const sub = labels.get("subresource");
    const key = `${labels.get("verb") ?? "?"} ${labels.get("resource") ?? ""}${sub ? `/${sub}` : ""}`;
    out[key] = (out[key] ?? 0) + Number(m[2]);
  }
  return out;
}

/** Watches open now, by resource (summed over groups, versions and scopes). */
export function parseOpenWatches(metrics: string): Record<string, number> {
  const out: Record<string, number> = {};
  for (const line of metrics.split("\n")) {
    const m = WATCHES.exec(line);
    if (!m) continue;
    const labels = labelsOf(m[1] ?? "");
    if (labels.get("verb") !== "WATCH") continue;
    const resource = labels.get("resource") ?? "";
    out[resource] = (out[resource] ?? 0) + Number(m[2]);
  }
  return out;
}

/** The API server's /metrics text. */
export async function scrapeMetrics(kubeConfig: KubeConfig): Promise<string> {
  const reply = await kube(kubeConfig, "GET", "/metrics");
  if (reply.status !== 200) throw new Error(`API server /metrics answered ${reply.status}`);
  // /metrics is text, which the helper hands back as `message`.
  const text = reply.body.message;
  return typeof text === "string" ? text : "";
}

export async function scrapeRequestCounts(kubeConfig: KubeConfig): Promise<RequestCounts> {
  return parseRequestCounts(await scrapeMetrics(kubeConfig));
}

/** Mean milliseconds the server spent per request of each key, over a delta of counts and of seconds. */
export function serverMsPerRequest(counts: RequestCounts, seconds: RequestCounts, keys: readonly string[]): Record<string, number> {
  const out: Record<string, number> = {};
  for (const k of keys) if ((counts[k] ?? 0) > 0) out[k] = Math.round(((seconds[k] ?? 0) / (counts[k] ?? 1)) * 10000) / 10;
  return out;
}

/** What was served between two scrapes, only the keys that grew. */
export function requestDelta(before: RequestCounts, after: RequestCounts): RequestCounts {
  const out: RequestCounts = {};
  for (const [k, v] of Object.entries(after)) {
    const d = v - (before[k] ?? 0);
    if (d > 0) out[k] = d;
  }
  return out;
}

/** The resources a Greeting operator touches (the rest is the control plane's own chatter). */
export const OPERATOR_RESOURCES = ["greetings", "greetings/status", "configmaps", "events"];

/** Requests on `resources` ("plural" or "plural/subresource") in a delta. */
export function operatorRequests(delta: RequestCounts, resources: readonly string[] = OPERATOR_RESOURCES): number {
  let n = 0;
  for (const [k, v] of Object.entries(delta)) if (resources.includes(k.split(" ")[1] ?? "")) n += v;
  return n;
}
