// The benchmark's writes to Greetings, over the same lean HTTPS client the functions use, so
// the load generator costs the shared CPU as little as the pipeline's own calls do.
import { ApiError } from "../clients/kube-http.ts";
import type { KubeApi, KubeObject, ResourceRef } from "../functions/runtime/kube-api.ts";

/** The kind written to: the example Greeting unless a Greeting-shaped kind is given (bench:platform's ten). */
export interface GreetingKind {
  group: string;
  version: string;
  plural: string;
  kind: string;
}

export const EXAMPLE_GREETING: GreetingKind = { group: "example.com", version: "v1", plural: "greetings", kind: "Greeting" };

export const objectName = (i: number): string => `bench-${String(i).padStart(5, "0")}`;

export class Greetings {
  readonly #api: KubeApi;
  readonly #namespace: string;
  readonly #kind: GreetingKind;

  constructor(api: KubeApi, namespace: string, kind: GreetingKind = EXAMPLE_GREETING) {
    this.#api = api;
    this.#namespace = namespace;
    this.#kind = kind;
  }

  #ref(name?: string): ResourceRef {
    const { group, version, plural } = this.#kind;
    return { group, version, plural, namespace: this.#namespace, ...(name === undefined ? {} : { name }) };
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
    const { group, version, kind } = this.#kind;
    const created = await this.#api.create(this.#ref(), { apiVersion: `${group}/${version}`, kind, metadata: { name }, spec: { message } });
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
    await this.#api.mergePatch({ ...this.#ref(), plural: `${this.#kind.plural}/${encodeURIComponent(name)}`, name: "status" }, { status: { benchSeq: seq } });
  }
}

function generationOf(o: KubeObject): number {
  return o.metadata.generation ?? 0;
}
