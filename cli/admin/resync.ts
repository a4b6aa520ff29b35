// `crdfn resync <resource> [name]`: re-announce objects on demand. It stamps the annotation
// crdfn.io/resync with the time on each object (as `kubectl rollout restart` stamps a Deployment):
// the bridge announces every change of an object's annotations, so each is reconciled once more,
// through its own FIFO group, wherever the bridge runs. It needs nothing but `patch` on the
// objects — no access to the queue or to the bridge.
import { Command } from "commander";
import { KubeHttp } from "../../clients/kube-http.ts";
import { loadKubeconfig } from "../../clients/kubeconfig.ts";
import { SetupError } from "../../emulator/errors.ts";
import { adminEnv } from "../environment.ts";

export const RESYNC_ANNOTATION = "crdfn.io/resync";

interface Discovered {
  group: string;
  version: string;
  plural: string;
  namespaced: boolean;
}

interface ApiResource {
  name: string;
  kind: string;
  namespaced: boolean;
  shortNames?: string[];
  singularName?: string;
}

/** `greetings`, `greeting`, `greet`, `Greeting` or `greetings.example.com`, as kubectl takes them. */
async function discover(http: KubeHttp, what: string): Promise<Discovered> {
  const [name = "", ...rest] = what.split(".");
  const wantGroup = rest.length > 0 ? rest.join(".") : undefined;
  const groups = ((await http.getJson("/apis", {})) as { groups?: Array<{ name: string; preferredVersion?: { version: string } }> }).groups ?? [];
  const candidates: Array<{ group: string; version: string; path: string }> = [
    ...(wantGroup === undefined || wantGroup === "" ? [{ group: "", version: "v1", path: "/api/v1" }] : []),
    ...groups
      .filter((g) => wantGroup === undefined || g.name === wantGroup)
      .map((g) => ({ group: g.name, version: g.preferredVersion?.version ?? "v1", path: `/apis/${g.name}/${g.preferredVersion?.version ?? "v1"}` })),
  ];
  const lower = name.toLowerCase();
  for (const c of candidates) {
    const resources = ((await http.getJson(c.path, {}).catch(() => ({}))) as { resources?: ApiResource[] }).resources ?? [];
    const found = resources.find(
      (r) => !r.name.includes("/") && (r.name === lower || r.singularName === lower || r.kind.toLowerCase() === lower || r.shortNames?.includes(lower)),
    );
    if (found) return { group: c.group, version: c.version, plural: found.name, namespaced: found.namespaced };
  }
  throw new SetupError(`the server does not serve a resource "${what}" (try its plural, e.g. greetings, or plural.group)`);
}

const base = (r: Discovered): string => (r.group === "" ? `/api/${r.version}` : `/apis/${r.group}/${r.version}`);

interface Listed {
  items?: Array<{ metadata: { name: string; namespace?: string } }>;
  metadata?: { continue?: string };
}

export async function resync(o: { http: KubeHttp; resource: string; name?: string; namespace?: string; allNamespaces: boolean; now: Date }): Promise<string[]> {
  const r = await discover(o.http, o.resource);
  const scope = r.namespaced && !o.allNamespaces ? `/namespaces/${o.namespace ?? "default"}` : "";
  const targets: Array<{ name: string; namespace?: string }> = [];
  if (o.name !== undefined) targets.push({ name: o.name, ...(r.namespaced ? { namespace: o.namespace ?? "default" } : {}) });
  else {
    let cont: string | undefined;
    do {
      const page = (await o.http.getJson(`${base(r)}${scope}/${r.plural}`, { limit: "500", continue: cont })) as Listed;
      for (const item of page.items ?? [])
        targets.push({ name: item.metadata.name, ...(item.metadata.namespace ? { namespace: item.metadata.namespace } : {}) });
      cont = page.metadata?.continue || undefined;
    } while (cont !== undefined);
  }
  const patch = { metadata: { annotations: { [RESYNC_ANNOTATION]: o.now.toISOString() } } };
  const done: string[] = [];
  for (const t of targets) {
    const path = `${base(r)}${t.namespace ? `/namespaces/${t.namespace}` : ""}/${r.plural}/${t.name}`;
    await o.http.json("PATCH", path, { body: patch, contentType: "application/merge-patch+json", query: { fieldManager: "crdfn-resync" } });
    done.push(t.namespace ? `${t.namespace}/${t.name}` : t.name);
  }
  return done;
}

export function resyncCommand(): Command {
  return new Command("resync")
    .description("reconcile objects again now: stamps the crdfn.io/resync annotation on each, which the bridge announces")
    .argument("<resource>", "the kind's plural, singular, short name or plural.group (e.g. greetings)")
    .argument("[name]", "one object; default every object in the namespace")
    .option("-n, --namespace <ns>", "namespace (default: default)")
    .option("-A, --all-namespaces", "every namespace")
    .option("--kubeconfig <file>", "kubeconfig (default: KUBECONFIG, .crdfn/env, ~/.kube/config)")
    .option("--context <name>", "kubeconfig context")
    .option("--state-dir <dir>", "where crdfn dev wrote its env", ".crdfn")
    .addHelpText(
      "after",
      "\nExamples:\n  $ crdfn resync greetings hello-world      # one object in default\n" +
        "  $ crdfn resync greetings -A              # every Greeting in the cluster\n" +
        "  $ crdfn resync crontabs.stable.example.com -n shop",
    )
    .action(
      async (
        resource: string,
        name: string | undefined,
        opts: { namespace?: string; allNamespaces?: boolean; kubeconfig?: string; context?: string; stateDir: string },
      ) => {
        const env = adminEnv(opts.stateDir);
        const { kubeConfig } = loadKubeconfig(opts.kubeconfig ?? env.KUBECONFIG, opts.context, env);
        const http = new KubeHttp({ connection: kubeConfig });
        const done = await resync({
          http,
          resource,
          ...(name ? { name } : {}),
          ...(opts.namespace ? { namespace: opts.namespace } : {}),
          allNamespaces: opts.allNamespaces === true,
          now: new Date(),
        });
        console.log(
          done.length === 0
            ? `no ${resource} to resync`
            : `resync requested for ${done.length} object(s): ${done.slice(0, 10).join(", ")}${done.length > 10 ? ", …" : ""}`,
        );
      },
    );
}
