// `npm run bench:writecost`: what each kind of write costs the API server and etcd (a
// cold start costs the API server 12.5 ms of CPU per object under crdfn against 8.2 under
// controller-runtime). On the embedded control plane, N Greetings (examples/greeting's CRD) get
// one write of each kind, one kind after another, `--concurrency` in flight over the admin
// kubeconfig and the HTTP client the functions use; the servers' CPU comes from /proc before and
// after each kind (with --chunk, after each kind's share of a chunk of objects, the kinds
// interleaved), and with nothing sent for 5 s before each round (their idle CPU, reported, not
// subtracted: one 5-second sample is too noisy on a shared machine). Each write is sent as its
// system sends it: crdfn's status PUT and child apply as functions/runtime/kube-api-http.ts
// does, controller-runtime's status merge patch and child POST as client-go does (but in JSON,
// where controller-runtime sends built-in kinds as protobuf), and the planned merge patch
// carrying metadata.resourceVersion.
// The admin sends them all; with --as-function, crdfn's own kinds are also sent by its function as
// deployed (its ServiceAccount token, Role and admission policy), and by a ServiceAccount bound to
// the same Role that the policy does not match, so that what the identity and what the policy
// cost show apart, beside what the kind costs.
import { createHash } from "node:crypto";
import { mkdirSync, writeFileSync } from "node:fs";
import { cpus, loadavg } from "node:os";
import { dirname, join } from "node:path";
import { Command, InvalidArgumentError, Option } from "commander";
import { serverConnection } from "../clients/kube-connection.ts";
import { KubeHttp } from "../clients/kube-http.ts";
import { applyDevIdentities, DEV_FUNCTIONS_NAMESPACE, type DevIdentities } from "../cli/local/dev-identities.ts";
import { functionRoleName } from "../deploy/rbac.ts";
import { installCrds } from "../cli/local/install-crds.ts";
import { canonicalJson } from "../core/canonical-json.ts";
import { APPLIED_HASH_ANNOTATION, PARENT_GENERATION_ANNOTATION, PARENT_UID_LABEL } from "../core/event.ts";
import type { ObjectStatus, Operator } from "../core/operator.ts";
import { reconciledRecord } from "../core/reconciled.ts";
import { resourcePath } from "../core/resource-path.ts";
import { startCluster } from "../emulator/cluster.ts";
import type { LocalCluster } from "../emulator/types.ts";
import { packageRoot } from "../emulator/paths.ts";
import greeting from "../examples/greeting/operator.ts";
import { createKubeApi } from "../functions/runtime/kube-api-http.ts";
import type { KubeObject } from "../functions/runtime/kube-api.ts";
import { READY, successStatus } from "../functions/runtime/status.ts";
import { forEachBounded } from "./drive.ts";
import { profiled, type POLICY_FRAMES, type POLICY_SITES, type PolicySeconds } from "./api-server-profile.ts";
import { applyAsAdmin, serviceAccountToken } from "./peers/identity.ts";
import { EXAMPLE_GREETING, Greetings, objectName } from "./greetings.ts";
import { clusterPids, cpuSeconds } from "./proc.ts";
import { runBench, wholeNumber } from "./command-line.ts";

/** The write kinds, in the order each round runs them. */
export const WRITE_KINDS = [
  "status PUT",
  "status merge PATCH + rv",
  "status merge PATCH",
  "child SSA create",
  "child POST create",
  "child SSA unchanged",
  "child SSA changed",
] as const;
export type WriteKind = (typeof WRITE_KINDS)[number];

/** Who sends each kind today, or "plan" for the one nobody sends yet. */
export const SENT_BY: Record<WriteKind, string> = {
  "status PUT": "crdfn",
  "status merge PATCH + rv": "plan",
  "status merge PATCH": "controller-runtime",
  "child SSA create": "crdfn",
  "child POST create": "controller-runtime",
  "child SSA unchanged": "crdfn, re-reconcile",
  "child SSA changed": "crdfn, spec change",
};

/**
 * Who sends a write: the admin (the kubeconfig's client certificate, authorized at once as
 * system:masters), or, with --as-function, crdfn's function as deployed (its ServiceAccount's
 * token, its Role, its admission policy's CEL: cli/local/dev-identities.ts), and "unfenced": a
 * ServiceAccount bound to the function's Role whom the policy's match condition does not name
 * (a token and RBAC as the function's, no policy).
 */
export type Sender = "admin" | "function" | "unfenced";

/** The unfenced sender's ServiceAccount, beside the function's. */
const UNFENCED_ACCOUNT = "writecost-unfenced";

const senderSuffix: Record<Sender, string> = { admin: "", function: ", as the function", unfenced: ", unfenced" };

/** The kinds crdfn's function sends today, which --as-function also sends as the function (its Role allows no status patch). */
export const FUNCTION_SENDS: readonly WriteKind[] = ["status PUT", "child SSA create", "child SSA unchanged", "child SSA changed"];

/** One write of a round: a kind and its sender. */
export interface Write {
  kind: WriteKind;
  sender: Sender;
}

/** A round's writes in order: each kind as the admin, and right after it, when `asFunction` and the function sends it, unfenced and as the function. */
export function writesOf(kinds: readonly WriteKind[], asFunction: boolean): Write[] {
  return kinds.flatMap((kind): Write[] => [
    { kind, sender: "admin" },
    ...(asFunction && FUNCTION_SENDS.includes(kind) ? (["unfenced", "function"] as const).map((sender) => ({ kind, sender })) : []),
  ]);
}

/** crdfn's field manager (core/operator.ts's default), which its status PUT and apply name. */
const FIELD_MANAGER = "crdfn";

/** How long the servers' CPU is sampled with nothing sent, before each round. */
const IDLE_MS = 5000;

/** One Greeting as the writer last knew it: as the bridge announces it, without managedFields. */
export interface Target {
  object: KubeObject;
  /** Its ConfigMaps' resourceVersions as last answered, by name. */
  children: Map<string, string>;
}

export interface WriteRequest {
  method: "PUT" | "PATCH" | "POST";
  path: string;
  contentType?: string;
  query?: Record<string, string>;
  body: Record<string, unknown>;
}

/** The object as the bridge announces it (bridge/parent-tracker.ts drops managedFields). */
export function asAnnounced(o: KubeObject): KubeObject {
  const { managedFields: _dropped, ...metadata } = o.metadata;
  return { ...o, metadata };
}

/**
 * The status crdfn writes after a reconcile (functions/runtime/status.ts), with a Ready message
 * and a `reconciled` record that `note` changes, so that every write changes the object.
 */
export function statusFor(o: KubeObject, note: string, now: Date): ObjectStatus {
  const generation = o.metadata.generation ?? 0;
  const record = reconciledRecord(o, [{ uid: `${o.metadata.uid ?? ""}-child`, token: note }]);
  const status = successStatus(o.status as ObjectStatus | undefined, { phase: "Ready" }, generation, now, undefined, undefined, record);
  return { ...status, conditions: (status.conditions ?? []).map((c) => (c.type === READY ? { ...c, message: note } : c)) };
}

/** The ConfigMap a Greeting's reconcile applies (functions/runtime/children.ts's planChild and applyChild), named `child`. */
export function childFor(o: KubeObject, child: string, message: string): KubeObject {
  const { name, namespace = "", uid = "", generation = 1 } = o.metadata;
  const unhashed = {
    apiVersion: "v1",
    kind: "ConfigMap",
    metadata: {
      name: child,
      namespace,
      labels: { "example.com/greeting": name, [PARENT_UID_LABEL]: uid },
      ownerReferences: [{ apiVersion: o.apiVersion, kind: o.kind, name, uid, controller: true, blockOwnerDeletion: true }],
    },
    data: { message },
  };
  const hash = createHash("sha256").update(canonicalJson(unhashed)).digest("hex").slice(0, 32);
  return {
    ...unhashed,
    metadata: { ...unhashed.metadata, annotations: { [APPLIED_HASH_ANNOTATION]: hash, [PARENT_GENERATION_ANNOTATION]: String(generation) } },
  };
}

const messageOf = (o: KubeObject): string => {
  const message = (o.spec as { message?: unknown } | undefined)?.message;
  return typeof message === "string" ? message : "";
};

/** The request of one write of `kind` to `t`'s Greeting in round `round`, exactly as its sender sends it. */
export function writeRequest(kind: WriteKind, t: Target, round: number, now: Date, sender: Sender = "admin"): WriteRequest {
  const o = t.object;
  const ref = { ...EXAMPLE_GREETING, namespace: o.metadata.namespace, name: o.metadata.name };
  // Each sender's status differs from the one before it, or the write would change nothing.
  const status = statusFor(o, `${kind}${senderSuffix[sender]}, round ${round}`, now);
  const child = (verb: string) => `${o.metadata.name}-r${round}${{ admin: "", function: "-fn", unfenced: "-un" }[sender]}-${verb}`;
  const configMaps = { group: "", version: "v1", plural: "configmaps", namespace: o.metadata.namespace };
  const apply = (body: KubeObject): WriteRequest => ({
    method: "PATCH",
    path: resourcePath({ ...configMaps, name: body.metadata.name }),
    contentType: "application/apply-patch+yaml",
    query: { fieldManager: FIELD_MANAGER, force: "true" },
    body,
  });
  switch (kind) {
    case "status PUT": // replaceStatus: the whole object, its resourceVersion the precondition
      return { method: "PUT", path: resourcePath(ref, "status"), query: { fieldManager: FIELD_MANAGER }, body: { ...o, status } };
    case "status merge PATCH + rv": // mergePatch with crdfn's field manager: the precondition kept
      return {
        method: "PATCH",
        path: resourcePath(ref, "status"),
        contentType: "application/merge-patch+json",
        query: { fieldManager: FIELD_MANAGER },
        body: { metadata: { resourceVersion: o.metadata.resourceVersion }, status },
      };
    case "status merge PATCH": // client-go's: no precondition
      // client-go names no field manager (the API server takes one from its user agent); crdfn's
      // is named here so that, as with either system alone, one manager owns the status fields
      // (two would hand them back and forth at every write, which neither system does).
      return {
        method: "PATCH",
        path: resourcePath(ref, "status"),
        contentType: "application/merge-patch+json",
        query: { fieldManager: FIELD_MANAGER },
        body: { status },
      };
    case "child SSA create":
    case "child SSA unchanged":
      return apply(childFor(o, child("apply"), messageOf(o)));
    case "child SSA changed":
      return apply(childFor(o, child("apply"), `changed in round ${round}`));
    case "child POST create": // the same ConfigMap as the apply, so only the verb differs
      return { method: "POST", path: resourcePath(configMaps), body: childFor(o, child("post"), messageOf(o)) };
  }
}

export interface KindResult {
  round: number;
  kind: WriteKind;
  sender: Sender;
  sentBy: string;
  requests: number;
  failures: number;
  /** Answers with a resourceVersion the object did not have before: writes etcd stored (an unchanged apply stores none). */
  stored: number;
  firstFailure?: string;
  wallSeconds: number;
  apiServerMsPerRequest: number;
  etcdMsPerRequest: number;
  loadAvgStart: number[];
  loadAvgEnd: number[];
  /** With --profile-api-server: the API server's CPU profile of these writes and the admission policy's share of it. */
  apiServerProfile?: PolicyProfile;
}

/** Where the API server's CPU went on the admission policy, ms per request, from its profile (POLICY_FRAMES, POLICY_SITES). */
export interface PolicyProfile {
  file: string;
  /** All the API server's CPU sampled, ms per request (the profile runs a few seconds past the writes: a little idle CPU is in it). */
  sampledMsPerRequest: number;
  msPerRequest: Record<keyof typeof POLICY_FRAMES | keyof typeof POLICY_SITES, number>;
}

/** A profile's seconds as ms per request of the `requests` it saw. */
export function policyProfile(summary: PolicySeconds, requests: number): PolicyProfile {
  const per = (seconds: number) => r2((seconds * 1000) / Math.max(1, requests));
  const msPerRequest = Object.fromEntries(Object.entries(summary.seconds).map(([k, v]) => [k, per(v)])) as PolicyProfile["msPerRequest"];
  return { file: summary.file, sampledMsPerRequest: per(summary.totalSeconds), msPerRequest };
}

/** One line of where the policy's CPU went, for a result that has a profile. */
export function profileLine(r: KindResult): string | undefined {
  const p = r.apiServerProfile;
  if (p === undefined) return undefined;
  const m = p.msPerRequest;
  return (
    `${r.kind}${senderSuffix[r.sender]}: API server sampled ${p.sampledMsPerRequest} ms per request, of which the admission policy ${m.policy} ` +
    `(match conditions ${m.matchConditions}, validations ${m.validations}, messages ${m.messages}, audit annotations ${m.auditAnnotations}; ` +
    `building CEL inputs ${m.activation} of it)`
  );
}

const r2 = (x: number): number => Math.round(x * 100) / 100;
const mean = (xs: readonly number[]): number => xs.reduce((s, x) => s + x, 0) / Math.max(1, xs.length);

/** One line per comparison (status writes; child creates; unchanged against changed apply), over the rounds' mean API server and etcd CPU per request. */
export function comparisons(results: readonly KindResult[]): string[] {
  const cost = (kind: WriteKind, sender: Sender = "admin") => {
    const of = results.filter((r) => r.kind === kind && r.sender === sender);
    return { api: mean(of.map((r) => r.apiServerMsPerRequest)), etcd: mean(of.map((r) => r.etcdMsPerRequest)) };
  };
  const vs = (kind: WriteKind, base: WriteKind) => {
    const a = cost(kind);
    const b = cost(base);
    const pct = kind === base || b.api === 0 ? "" : ` (${a.api >= b.api ? "+" : ""}${Math.round(((a.api - b.api) / b.api) * 100)} %)`;
    return `${kind} ${r2(a.api)}${pct} / etcd ${r2(a.etcd)}`;
  };
  const ran = (kind: WriteKind, sender: Sender = "admin") => results.some((r) => r.kind === kind && r.sender === sender);
  const line = (what: string, base: WriteKind, others: WriteKind[]) =>
    [base, ...others].every((k) => ran(k)) ? [`${what}, API server / etcd ms per request: ${[base, ...others].map((k) => vs(k, base)).join("; ")}`] : [];
  return [
    ...line("status", "status PUT", ["status merge PATCH + rv", "status merge PATCH"]),
    ...line("child create", "child POST create", ["child SSA create"]),
    ...line("child apply of an existing ConfigMap", "child SSA unchanged", ["child SSA changed"]),
    ...senderLine(["function", "admin"], "as the function against as the admin"),
    ...senderLine(["unfenced", "admin"], "the identity alone (unfenced against the admin)"),
    ...senderLine(["function", "unfenced"], "the admission policy alone (as the function against unfenced)"),
  ];
  function senderLine([a, b]: [Sender, Sender], what: string): string[] {
    const kinds = FUNCTION_SENDS.filter((k) => ran(k, a) && ran(k, b));
    if (kinds.length === 0) return [];
    const each = kinds.map((k) => {
      const [x, y] = [cost(k, a), cost(k, b)];
      return `${k} ${r2(x.api)} against ${r2(y.api)} (${x.api >= y.api ? "+" : ""}${r2(x.api - y.api)} ms) / etcd ${r2(x.etcd)} against ${r2(y.etcd)}`;
    });
    return [`${what}, API server / etcd ms per request: ${each.join("; ")}`];
  }
}

export function formatTable(results: readonly KindResult[]): string {
  const load = (l: number[]) => (l[0] ?? 0).toFixed(1);
  const rows = results.map(
    (r) =>
      `| ${r.round} | ${r.kind}${senderSuffix[r.sender]} | ${r.sentBy} | ${r.requests} | ${r.wallSeconds.toFixed(1)} | ${r.apiServerMsPerRequest.toFixed(2)} | ${r.etcdMsPerRequest.toFixed(2)} | ${r.stored} | ${r.failures} | ${load(r.loadAvgStart)} → ${load(r.loadAvgEnd)} |`,
  );
  return [
    "| round | kind | sent by | requests | wall s | API server ms/request | etcd ms/request | stored | failures | load avg |",
    "|---|---|---|---|---|---|---|---|---|---|",
    ...rows,
  ].join("\n");
}

/** The servers' CPU with nothing sent (their controllers, leases, the garbage collector's watches), ms per second, over `ms`. */
export interface Idle {
  round: number;
  apiServerMsPerSecond: number;
  etcdMsPerSecond: number;
}

async function idleCpu(round: number, pids: { apiServer: number; etcd: number }, ms: number): Promise<Idle> {
  const api0 = cpuSeconds(pids.apiServer) ?? 0;
  const etcd0 = cpuSeconds(pids.etcd) ?? 0;
  const t0 = performance.now();
  await new Promise((r) => setTimeout(r, ms));
  const s = (performance.now() - t0) / 1000;
  return {
    round,
    apiServerMsPerSecond: r2((((cpuSeconds(pids.apiServer) ?? 0) - api0) * 1000) / s),
    etcdMsPerSecond: r2((((cpuSeconds(pids.etcd) ?? 0) - etcd0) * 1000) / s),
  };
}

interface Options {
  kinds: WriteKind[];
  objects: number;
  /** Objects per chunk when the kinds are interleaved; undefined: all N, one kind after another. */
  chunk?: number;
  concurrency: number;
  rounds: number;
  asFunction: boolean;
  profileApiServer: boolean;
  json?: string;
}

/** What one kind's writes to some of the objects cost: summed over a round's chunks. */
export interface Tally {
  requests: number;
  failures: number;
  stored: number;
  firstFailure?: string;
  wallSeconds: number;
  apiServerSeconds: number;
  etcdSeconds: number;
  loadAvgStart: number[];
  loadAvgEnd: number[];
}

/** Two tallies of one kind as one: the earlier's start, the later's end. */
export function addTally(a: Tally | undefined, b: Tally): Tally {
  if (a === undefined) return b;
  return {
    requests: a.requests + b.requests,
    failures: a.failures + b.failures,
    stored: a.stored + b.stored,
    ...((a.firstFailure ?? b.firstFailure) === undefined ? {} : { firstFailure: a.firstFailure ?? b.firstFailure }),
    wallSeconds: a.wallSeconds + b.wallSeconds,
    apiServerSeconds: a.apiServerSeconds + b.apiServerSeconds,
    etcdSeconds: a.etcdSeconds + b.etcdSeconds,
    loadAvgStart: a.loadAvgStart,
    loadAvgEnd: b.loadAvgEnd,
  };
}

export function resultOf(round: number, { kind, sender }: Write, t: Tally): KindResult {
  const { apiServerSeconds, etcdSeconds, ...rest } = t;
  return {
    round,
    kind,
    sender,
    sentBy: SENT_BY[kind],
    ...rest,
    wallSeconds: r2(t.wallSeconds),
    apiServerMsPerRequest: r2((apiServerSeconds * 1000) / Math.max(1, t.requests)),
    etcdMsPerRequest: r2((etcdSeconds * 1000) / Math.max(1, t.requests)),
  };
}

/** One write of `kind` to each of `targets`, `concurrency` in flight, with the servers' CPU before and after. */
async function runChunk(
  http: KubeHttp,
  { kind, sender }: Write,
  targets: readonly Target[],
  round: number,
  concurrency: number,
  pids: { apiServer: number; etcd: number },
): Promise<Tally> {
  const loadAvgStart = loadavg();
  const api0 = cpuSeconds(pids.apiServer) ?? 0;
  const etcd0 = cpuSeconds(pids.etcd) ?? 0;
  const t0 = performance.now();
  let failures = 0;
  let stored = 0;
  let firstFailure: string | undefined;
  await forEachBounded(targets.length, concurrency, async (i) => {
    const t = targets[i]!;
    const req = writeRequest(kind, t, round, new Date(), sender);
    try {
      const answer = (await http.json(req.method, req.path, { body: req.body, contentType: req.contentType, query: req.query })) as KubeObject;
      const status = kind.startsWith("status");
      const child = String((req.body.metadata as { name?: string } | undefined)?.name ?? "");
      const before = status ? t.object.metadata.resourceVersion : t.children.get(child);
      if (answer.metadata.resourceVersion !== before) stored++;
      // A status write's answer is the Greeting as the next event would carry it.
      if (status) t.object = asAnnounced(answer);
      else t.children.set(child, answer.metadata.resourceVersion ?? "");
    } catch (e) {
      failures++;
      firstFailure ??= e instanceof Error ? e.message : String(e);
    }
  });
  return {
    requests: targets.length,
    failures,
    stored,
    ...(firstFailure === undefined ? {} : { firstFailure }),
    wallSeconds: (performance.now() - t0) / 1000,
    apiServerSeconds: (cpuSeconds(pids.apiServer) ?? 0) - api0,
    etcdSeconds: (cpuSeconds(pids.etcd) ?? 0) - etcd0,
    loadAvgStart,
    loadAvgEnd: loadavg(),
  };
}

/**
 * One round: every kind once per object. With `chunk` < N the objects are taken `chunk` at a
 * time, every kind in order on each chunk, so that a change in the machine's load during the
 * round falls on every kind alike; each kind's figures are summed over the chunks.
 */
async function runRound(
  clients: Record<Sender, KubeHttp | undefined>,
  targets: readonly Target[],
  round: number,
  o: Options,
  pids: { apiServer: number; etcd: number },
  profiling: { cluster: Pick<LocalCluster, "kubectl" | "kubeconfigPath">; dir: string } | undefined,
): Promise<KindResult[]> {
  const writes = writesOf(o.kinds, o.asFunction);
  const tallies = new Map<Write, Tally>();
  const profiles = new Map<Write, PolicyProfile>();
  const size = o.chunk ?? targets.length;
  for (let from = 0; from < targets.length; from += size) {
    const chunk = targets.slice(from, from + size);
    for (const w of writes) {
      const http = clients[w.sender];
      if (http === undefined) throw new Error(`no client for the ${w.sender}`);
      const send = () => runChunk(http, w, chunk, round, o.concurrency, pids);
      if (profiling === undefined) {
        tallies.set(w, addTally(tallies.get(w), await send()));
        continue;
      }
      // --profile-api-server excludes --chunk: one chunk, one profile per write.
      const file = join(profiling.dir, `${round}-${w.kind.replace(/\W+/g, "-")}-${w.sender}.pb.gz`);
      const { result, summary } = await profiled(profiling.cluster, file, send);
      tallies.set(w, result);
      if (summary !== undefined) profiles.set(w, policyProfile(summary, result.requests));
    }
  }
  return writes.map((w) => {
    const profile = profiles.get(w);
    return { ...resultOf(round, w, tallies.get(w)!), ...(profile === undefined ? {} : { apiServerProfile: profile }) };
  });
}

async function writeCost(o: Options, log: (l: string) => void): Promise<{ path: string; results: KindResult[]; idle: Idle[] }> {
  const startedAt = new Date().toISOString();
  log("starting the embedded cluster…");
  const cluster = await startCluster({ log: () => {} });
  const results: KindResult[] = [];
  const idle: Idle[] = [];
  let identities: DevIdentities | undefined;
  try {
    await installCrds(cluster.kubeConfig, [greeting] as ReadonlyArray<Operator<unknown>>);
    const { apiServer, etcd } = clusterPids(Number(new URL(cluster.server).port));
    if (apiServer === undefined || etcd === undefined) throw new Error("the API server's or etcd's process was not found in /proc");
    const api = createKubeApi({ connection: cluster.kubeConfig });
    const http = new KubeHttp({ connection: cluster.kubeConfig });
    const namespace = `writecost-${Date.now()}`;
    if (o.asFunction) {
      log("applying crdfn's identities, Role and admission policies for the Greeting operator, as deployed…");
      identities = await applyDevIdentities({
        kubeConfig: cluster.kubeConfig,
        operators: [greeting] as ReadonlyArray<Operator<unknown>>,
        namespaces: [namespace],
        project: "writecost",
        log,
      });
    }
    const clients: Record<Sender, KubeHttp | undefined> = {
      admin: http,
      function: identities === undefined ? undefined : new KubeHttp({ connection: identities.functionConnection(greeting) }),
      unfenced: identities === undefined ? undefined : await unfencedClient(cluster, namespace),
    };
    const greetings = new Greetings(api, namespace);
    await greetings.createNamespace();
    log(`creating ${o.objects} Greetings in ${namespace}…`);
    await forEachBounded(o.objects, o.concurrency, (i) => greetings.create(objectName(i), `hello ${i}`).then(() => undefined));
    const targets: Target[] = (await api.list({ ...EXAMPLE_GREETING, namespace })).map((g) => ({
      object: asAnnounced(g),
      children: new Map<string, string>(),
    }));
    // Every timed status write changes a status already there, as a re-reconcile's does; the
    // first one (a cold start's) also adds the status and its managedFields entry.
    log("writing each Greeting's first status (not timed)…");
    await runChunk(http, { kind: "status PUT", sender: "admin" }, targets, 0, o.concurrency, { apiServer, etcd });
    for (let round = 1; round <= o.rounds; round++) {
      const quiet = await idleCpu(round, { apiServer, etcd }, IDLE_MS);
      log(`round ${round}: with nothing sent, the API server uses ${quiet.apiServerMsPerSecond} ms and etcd ${quiet.etcdMsPerSecond} ms of CPU per second`);
      idle.push(quiet);
      const profiling = o.profileApiServer ? { cluster, dir: `${resultsPath(o, startedAt).replace(/\.json$/, "")}-api-server` } : undefined;
      for (const r of await runRound(clients, targets, round, o, { apiServer, etcd }, profiling)) {
        log(
          `  round ${round}, ${r.kind}${senderSuffix[r.sender]}: ${r.wallSeconds.toFixed(1)} s, API server ${r.apiServerMsPerRequest} ms, etcd ${r.etcdMsPerRequest} ms per request, ${r.stored} stored, ${r.failures} failures (load ${r.loadAvgStart[0]?.toFixed(1)} → ${r.loadAvgEnd[0]?.toFixed(1)})`,
        );
        if (r.firstFailure !== undefined) log(`    first failure: ${r.firstFailure}`);
        const profile = profileLine(r);
        if (profile !== undefined) log(`    profile: ${profile}`);
        results.push(r);
      }
    }
  } finally {
    identities?.stop();
    await cluster.stop();
  }
  const path = resultsPath(o, startedAt);
  mkdirSync(dirname(path), { recursive: true });
  const summary = comparisons(results);
  writeFileSync(
    path,
    `${JSON.stringify({ startedAt, finishedAt: new Date().toISOString(), machine: { cpus: cpus().length, node: process.version }, options: o, idle, results, summary }, null, 2)}\n`,
  );
  return { path, results, idle };
}

/** Where the results go (and, beside them, the API server's profiles). */
const resultsPath = (o: Options, startedAt: string): string =>
  o.json ?? join(packageRoot, "bench-results", `writecost-${startedAt.replace(/[:.]/g, "-")}.json`);

/**
 * A ServiceAccount bound to the function's own Role in `namespace` (so RBAC answers it as it
 * answers the function), whom the function's admission policy does not match: its writes cost
 * the token and RBAC, not the policy's CEL.
 */
async function unfencedClient(cluster: Awaited<ReturnType<typeof startCluster>>, namespace: string): Promise<KubeHttp> {
  const role = functionRoleName(greeting);
  const manifests = [
    { apiVersion: "v1", kind: "ServiceAccount", metadata: { name: UNFENCED_ACCOUNT, namespace: DEV_FUNCTIONS_NAMESPACE } },
    {
      apiVersion: "rbac.authorization.k8s.io/v1",
      kind: "RoleBinding",
      metadata: { name: UNFENCED_ACCOUNT, namespace },
      roleRef: { apiGroup: "rbac.authorization.k8s.io", kind: "Role", name: role },
      subjects: [{ kind: "ServiceAccount", name: UNFENCED_ACCOUNT, namespace: DEV_FUNCTIONS_NAMESPACE }],
    },
  ];
  await applyAsAdmin(cluster, manifests);
  const token = await serviceAccountToken(cluster, UNFENCED_ACCOUNT, DEV_FUNCTIONS_NAMESPACE);
  return new KubeHttp({ connection: serverConnection({ server: cluster.server, caFile: cluster.caPath, token: () => Promise.resolve(token) }) });
}

/** `--kinds`: names from WRITE_KINDS, in the order to run them; an apply of an existing child needs its create before it. */
export function kindList(text: string): WriteKind[] {
  const names = text.split(",").map((k) => k.trim());
  const unknown = names.filter((n) => !(WRITE_KINDS as readonly string[]).includes(n));
  if (unknown.length) throw new InvalidArgumentError(`unknown kind ${unknown.map((u) => `"${u}"`).join(", ")} (known: ${WRITE_KINDS.join(", ")})`);
  const kinds = names as WriteKind[];
  const create = kinds.indexOf("child SSA create");
  for (const later of ["child SSA unchanged", "child SSA changed"] as const)
    if (kinds.includes(later) && (create < 0 || kinds.indexOf(later) < create))
      throw new InvalidArgumentError(`--kinds: "${later}" needs "child SSA create" before it`);
  return kinds;
}

function writeCostCommand(): Command {
  return new Command("npm run bench:writecost --")
    .description(
      "What each kind of write costs the API server and etcd: status PUT (crdfn), status merge patch with and without resourceVersion (the plan; controller-runtime), " +
        "child server-side apply create / unchanged / changed (crdfn) and POST create (controller-runtime), once per object, CPU per request from /proc",
    )
    .addOption(new Option("--objects <n>", "Greetings written to, each once per kind and round").argParser(wholeNumber("--objects")).default(2000))
    .addOption(new Option("--concurrency <n>", "requests in flight").argParser(wholeNumber("--concurrency")).default(8))
    .addOption(
      new Option(
        "--chunk <n>",
        "interleave the kinds: every kind on this many objects, then on the next as many (default: all N, one kind after another)",
      ).argParser(wholeNumber("--chunk")),
    )
    .addOption(new Option("--rounds <n>", "times the whole sequence of kinds is run").argParser(wholeNumber("--rounds")).default(2))
    .addOption(
      new Option("--kinds <list>", "the write kinds to run, comma-separated, in this order (e.g. reversed, to see whether the order matters)")
        .argParser(kindList)
        .default([...WRITE_KINDS], WRITE_KINDS.join(",")),
    )
    .option(
      "--as-function",
      `also send crdfn's own kinds (${FUNCTION_SENDS.join(", ")}) as its function as deployed (its ServiceAccount token, Role and admission policy), and as a ServiceAccount with the same Role that the policy does not match, each right after the same kind as the admin`,
      false,
    )
    .addOption(
      new Option(
        "--profile-api-server",
        "profile the API server's CPU (Go's pprof) during each kind's writes, and say how much of it its admission policy took, and on what (needs go on PATH for the summary); files beside the results",
      )
        .default(false)
        .conflicts("chunk"),
    )
    .option("--json <path>", "where to write the results (default bench-results/writecost-<timestamp>.json)")
    .addHelpText(
      "after",
      '\nExamples (a smoke run, about a minute on 2 cores; the status writes in the other order):\n  npm run bench:writecost -- --objects 200 --rounds 1\n  npm run bench:writecost -- --kinds "status merge PATCH,status merge PATCH + rv,status PUT"',
    )
    .action(async (o: Options) => {
      const load = loadavg()
        .map((l) => l.toFixed(2))
        .join(" ");
      console.log(
        `bench:writecost — ${o.objects} objects, ${o.concurrency} in flight, ${o.rounds} rounds, ${o.chunk === undefined ? "one kind after another" : `kinds interleaved by ${o.chunk} objects`}; load average ${load} at start`,
      );
      const { path, results, idle } = await writeCost(o, (line) => console.error(line));
      for (const q of idle) console.log(`round ${q.round}, nothing sent: API server ${q.apiServerMsPerSecond} ms/s, etcd ${q.etcdMsPerSecond} ms/s of CPU`);
      console.log(formatTable(results));
      for (const line of comparisons(results)) console.log(line);
      for (const line of results.map(profileLine).filter((l) => l !== undefined)) console.log(`profile: ${line}`);
      console.log(`load average ${loadavg()[0]!.toFixed(2)} at the end\nresults: ${path}`);
    });
}

if (import.meta.main) await runBench("bench:writecost", writeCostCommand());
