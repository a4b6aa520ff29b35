// Where a resource lives in the Kubernetes REST API. Every segment is URL-encoded: names come
// from objects and configuration, never from a trusted list.

/** A kind of resource, as the REST API names it. */
export interface GroupVersionResource {
  /** "" for the core group. */
  group: string;
  version: string;
  plural: string;
}

/** A REST location: the collection when `name` is absent, every namespace when `namespace` is. */
export interface ResourceRef extends GroupVersionResource {
  namespace?: string;
  name?: string;
}

/** The discovery document of a group/version: "/api/v1" for the core group, else "/apis/<group>/<version>". */
export function groupVersionPath(ref: Pick<GroupVersionResource, "group" | "version">): string {
  const version = encodeURIComponent(ref.version);
  return ref.group === "" ? `/api/${version}` : `/apis/${encodeURIComponent(ref.group)}/${version}`;
}

/**
 * An object's key among the objects of its kind: "<namespace>/<name>", "/<name>" for a
 * cluster-scoped one. The bridge's index, the children's keys in a key event and the runtime's
 * observed children and references all key by it.
 */
// join, not a template: it makes a flat string, where a template's concatenation stays a 32-byte
// pair of pieces in front of it once flattened, and the bridge keeps a key per object of each kind.
export const keyOf = (namespace: string | undefined, name: string): string => [namespace ?? "", name].join("/");

/** The namespace (undefined when cluster-scoped) and name of a key made by keyOf. */
export const splitKey = (key: string): [string | undefined, string] => {
  const slash = key.indexOf("/");
  return [slash === 0 ? undefined : key.slice(0, slash), key.slice(slash + 1)];
};

/** The API group of an apiVersion: "stable.example.com/v1" → "stable.example.com"; "v1" (the core group) → "". */
export function groupOf(apiVersion: string | undefined): string {
  const slash = apiVersion?.lastIndexOf("/") ?? -1;
  return slash < 0 ? "" : apiVersion!.slice(0, slash);
}

export function resourcePath(ref: ResourceRef, subresource?: string): string {
  const ns = ref.namespace ? `/namespaces/${encodeURIComponent(ref.namespace)}` : "";
  const name = ref.name ? `/${encodeURIComponent(ref.name)}` : "";
  const sub = subresource ? `/${encodeURIComponent(subresource)}` : "";
  return `${groupVersionPath(ref)}${ns}/${encodeURIComponent(ref.plural)}${name}${sub}`;
}
