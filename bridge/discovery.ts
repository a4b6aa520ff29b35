// Resolves a configured group/version/plural to its kind and scope through API discovery,
// which every authenticated identity may read. A resource that is not served yet (its CRD is
// still being created) is waited for rather than treated as fatal.
import type { Logger } from "pino";
import type { ResourceRef } from "./config.ts";
import { KubeHttpError, type KubeHttp } from "./kube-http.ts";
import type { ResolvedResource } from "./tracker.ts";

interface ApiResourceList {
  resources?: Array<{ name: string; kind: string; namespaced: boolean }>;
}

/** `onWaiting`: called once when the resource turns out not to be served (yet); `onRefused`: on 401/403 (said by the caller). */
export async function resolveResource(
  http: KubeHttp,
  ref: ResourceRef,
  signal: AbortSignal,
  logger: Logger,
  hooks: { onWaiting?: () => void; onRefused?: (e: KubeHttpError | undefined) => void } = {},
): Promise<ResolvedResource> {
  const { onWaiting, onRefused } = hooks;
  const path = ref.group === "" ? `/api/${ref.version}` : `/apis/${ref.group}/${ref.version}`;
  for (let attempt = 1; ; attempt++) {
    try {
      const list = (await http.getJson(path, {}, signal)) as ApiResourceList;
      const found = list.resources?.find((r) => r.name === ref.plural);
      if (found !== undefined) return { ...ref, kind: found.kind, namespaced: found.namespaced };
      if (attempt === 1) {
        logger.warn({ path, plural: ref.plural }, "resource not served (yet); waiting for it");
        onWaiting?.();
      }
    } catch (e) {
      signal.throwIfAborted();
      if (attempt === 1 && e instanceof KubeHttpError && e.status === 404) onWaiting?.();
      const refused = e instanceof KubeHttpError && (e.status === 401 || e.status === 403) && onRefused !== undefined;
      if (refused) onRefused(e);
      else if (attempt === 1 || !(e instanceof KubeHttpError && e.status === 404)) logger.warn({ path, err: (e as Error).message }, "API discovery failed; retrying");
    }
    await new Promise((resolve) => setTimeout(resolve, Math.min(5000, 250 * attempt)));
    signal.throwIfAborted();
  }
}
