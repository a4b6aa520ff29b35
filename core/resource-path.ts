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

export function resourcePath(ref: ResourceRef, subresource?: string): string {
  const ns = ref.namespace ? `/namespaces/${encodeURIComponent(ref.namespace)}` : "";
  const name = ref.name ? `/${encodeURIComponent(ref.name)}` : "";
  const sub = subresource ? `/${encodeURIComponent(subresource)}` : "";
  return `${groupVersionPath(ref)}${ns}/${encodeURIComponent(ref.plural)}${name}${sub}`;
}
