// `npm run bench:diff`: how long `crdfn diff` takes over N live objects (default 1,000 Greetings,
// each with its ConfigMap) on the embedded control plane: once with the deployed code (nothing to
// change: one consistent GET of the object and a LIST per owned kind each) and once with a changed
// operator (a server-side dry-run apply per child as well), at the command's default concurrency.
// The objects are reconciled first by the function's own steps (local-reconcile.ts, writing).
import { pino } from "pino";
import { diffObjects, formatDiffs } from "../cli/admin/diff.ts";
import { reconcileLocally } from "../cli/admin/local-reconcile.ts";
import { startCluster } from "../emulator/cluster.ts";
import greeting from "../examples/greeting/operator.ts";
import type { Operator } from "../core/operator.ts";
import { createKubeApi } from "../functions/runtime/kube-api-http.ts";
import { installCrd } from "../test/support/functions-environment.ts";
import { parallel } from "../test/support/promises.ts";
import { Greetings, objectName } from "./greetings.ts";

const N = Number(process.env.BENCH_OBJECTS ?? 1000);
const NS = "bench-diff";
const deployed = greeting as Operator<unknown>;
const changed: Operator<unknown> = {
  ...deployed,
  reconcile: (g, ctx) => {
    const r = deployed.reconcile(g, ctx);
    return { ...r, children: r.children?.map((c) => ({ ...c, data: { message: `${String((c as { data?: { message?: string } }).data?.message)}!` } })) };
  },
};

const cluster = await startCluster({ log: () => {}, queue: false });
try {
  const api = createKubeApi({ connection: cluster.kubeConfig });
  const logger = pino({ level: "silent" });
  const clock = () => new Date();
  await installCrd(api, deployed);
  const greetings = new Greetings(api, NS);
  await greetings.createNamespace();
  // The CRD is served once it is established.
  for (let i = 0; ; i++) {
    try {
      await api.list({ group: "example.com", version: "v1", plural: "greetings", namespace: NS });
      break;
    } catch (e) {
      if (i > 100) throw e;
      await new Promise((r) => setTimeout(r, 100));
    }
  }
  const t0 = Date.now();
  await parallel(
    Array.from({ length: N }, (_, i) => i),
    16,
    async (i) => {
      await greetings.create(objectName(i), `hello ${i}`);
      await reconcileLocally(deployed, { metadata: { name: objectName(i), namespace: NS } }, { api, logger, clock, cluster: "bench" });
    },
  );
  console.log(`# ${N} Greetings created and reconciled in ${((Date.now() - t0) / 1000).toFixed(1)} s`);
  const dryRun = createKubeApi({ connection: cluster.kubeConfig }, { dryRun: true });
  for (const [what, op] of [
    ["deployed code (nothing changes)", deployed],
    ["changed operator (every ConfigMap changes)", changed],
  ] as const) {
    const started = process.hrtime.bigint();
    const diffs = await diffObjects({ operators: [op], api: dryRun, logger, clock, namespace: NS });
    const seconds = Number(process.hrtime.bigint() - started) / 1e9;
    const { lines } = formatDiffs(diffs);
    console.log(`crdfn diff, ${what}: ${N} objects in ${seconds.toFixed(2)} s (${((seconds * 1000) / N).toFixed(2)} ms per object); ${lines.at(-1)}`);
  }
  const { loadavg } = await import("node:os");
  console.log(
    `# load average ${loadavg()
      .map((l) => l.toFixed(1))
      .join(" ")}`,
  );
} finally {
  await cluster.stop();
}
