// The runtime's KubeApi port on the shared API-server client.
import { ApiError, KubeHttp, type KubeAccess } from "../../clients/kube-http.ts";
import { resourcePath } from "../../core/resource-path.ts";
import type { KubeApi, KubeObject } from "./kube-api.ts";

export function createKubeApi(access: KubeAccess): KubeApi {
  const http = new KubeHttp(access);
  const write = async (method: string, path: string, body: unknown, contentType?: string, query?: Record<string, string>): Promise<KubeObject> =>
    (await http.json(method, path, { body, contentType, query })) as KubeObject;
  return {
    get: async (ref) => {
      try {
        return (await http.json("GET", resourcePath(ref))) as KubeObject;
      } catch (e) {
        if (e instanceof ApiError && e.code === 404) return undefined;
        throw e;
      }
    },
    replaceStatus: (ref, object) => write("PUT", resourcePath(ref, "status"), object),
    mergePatch: (ref, patch) => write("PATCH", resourcePath(ref), patch, "application/merge-patch+json"),
    apply: (ref, object, fieldManager) => write("PATCH", resourcePath(ref), object, "application/apply-patch+yaml", { fieldManager, force: "true" }),
    create: (ref, object) => write("POST", resourcePath(ref), object),
  };
}
