// The benchmark's writes to Greetings, over the same lean HTTPS client the functions use, so
// the load generator costs the shared CPU as little as the pipeline's own calls do.
import { ApiError } from "../clients/kube-http.ts";
import type { KubeApi, KubeObject, ResourceRef } from "../functions/runtime/kube-api.ts";

const GROUP = "example.com";
const VERSION = "v1";

export const objectName = (i: number): string => `bench-${String(i).padStart(5, "0")}`;

export class Greetings {
  readonly #api: KubeApi;
  readonly #namespace: string;

  constructor(api: KubeApi, namespace: string) {
    this.#api = api;
    this.#namespace = namespace;
  }

  #ref(name?: string): ResourceRef {
    return { group: GROUP, version: VERSION, plural: "greetings", namespace: this.#namespace, ...(name === undefined ? {} : { name }) };
  }

  /** Creates the namespace unless it exists: crdfn as deployed creates the namespaces it serves (its Roles live there). */
  async createNamespace(): Promise<void> {
    try {
      await this.#api.create({ group: "", version: "v1", plural: "namespaces" }, { apiVersion: "v1", kind: "Namespace", metadata: { name: this.#namespace } });
    } catch (e) {
      if (!(e instanceof ApiError && e.code === 409)) throw e;
    }
  }

  /** Creates the Greeting; returns its generation. */
  async create(name: string, message: string): Promise<number> {
    const created = await this.#api.create(this.#ref(), { apiVersion: `${GROUP}/${VERSION}`, kind: "Greeting", metadata: { name }, spec: { message } });
    return generationOf(created);
  }

  /** A spec change (JSON merge patch of spec.message); returns the generation it made. */
  async setMessage(name: string, message: string): Promise<number> {
    return generationOf(await this.#api.mergePatch(this.#ref(name), { spec: { message } }));
  }

  /** A status-only write (JSON merge patch of the /status subresource): the raw ceiling's unit of work. */
  async patchStatus(name: string, seq: number): Promise<void> {
    // KubeApi addresses /status only through replaceStatus (a PUT); a merge patch reaches the
    // subresource when the object's name is part of the collection path and "status" is the name.
    await this.#api.mergePatch({ ...this.#ref(), plural: `greetings/${encodeURIComponent(name)}`, name: "status" }, { status: { benchSeq: seq } });
  }
}

function generationOf(o: KubeObject): number {
  return o.metadata.generation ?? 0;
}
