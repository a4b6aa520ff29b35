// Resolves a configured group/version/plural to its kind and scope through API discovery,
// which every authenticated identity may read. A resource that is not served yet (its CRD is
// still being created) is waited for rather than treated as fatal. An outage of the API server
// (clients/kube-errors.ts isServerOutage) is retried at least every second, like the reflectors.
import { setTimeout as delay } from "node:timers/promises";
import type { Logger } from "pino";
import { ApiError, isServerOutage, type KubeHttp } from "../clients/kube-http.ts";
import { backoffMs } from "../core/backoff.ts";
import { groupVersionPath, type GroupVersionResource } from "../core/resource-path.ts";
import type { ResolvedResource } from "./sink.ts";

interface ApiResourceList {
  resources?: Array<{ name: string; kind: string; namespaced: boolean }>;
}

/** Retry cap while the API server is down, hung or starting: it must be noticed as soon as it answers. */
const SERVER_DOWN_RETRY_MS = 1000;

/** `onWaiting`: called once when the resource turns out not to be served (yet); `onRefused`: on a ready server's 401/403 (said by the caller); `onFailed`: each failed attempt, before its retry. */
export async function resolveResource(
  http: KubeHttp,
  ref: GroupVersionResource,
  signal: AbortSignal,
  logger: Logger,
  hooks: { onWaiting?: () => void; onRefused?: (e: ApiError | undefined) => void; onFailed?: (code: number | undefined) => void } = {},
): Promise<ResolvedResource> {
  const { onWaiting, onRefused, onFailed } = hooks;
  const path = groupVersionPath(ref);
  for (let attempt = 1; ; attempt++) {
    let down = false;
    try {
      const list = (await http.getJson(path, {}, signal)) as ApiResourceList;
      const found = list.resources?.find((r) => r.name === ref.plural);
      if (found !== undefined) return { ...ref, kind: found.kind, namespaced: found.namespaced };
      onFailed?.(404);
      if (attempt === 1) {
        logger.warn({ path, plural: ref.plural }, "resource not served (yet); waiting for it");
        onWaiting?.();
      }
    } catch (e) {
      signal.throwIfAborted();
      onFailed?.(e instanceof ApiError ? e.code : undefined);
      if (attempt === 1 && e instanceof ApiError && e.code === 404) onWaiting?.();
      down = isServerOutage(e);
      const refused = !down && e instanceof ApiError && (e.code === 401 || e.code === 403) && onRefused !== undefined;
      if (refused) onRefused(e);
      else if (attempt === 1 || !(e instanceof ApiError && e.code === 404)) logger.warn({ path, err: (e as Error).message }, "API discovery failed; retrying");
    }
    await delay(backoffMs(attempt, { initialMs: 250, maxMs: down ? SERVER_DOWN_RETRY_MS : 5000 }), undefined, { signal }).catch(() => undefined);
    signal.throwIfAborted();
  }
}
