// What a 401/403 on the bridge's list or watch means, in one line for the person who must fix it.
// Two different things: the API server did not accept the credential (401, or a 403 to
// system:anonymous: no identity at all), where the token or kubeconfig is what to check; or it
// accepted the credential and the identity it names lacks the grant (403 naming that identity),
// where the token is fine and its Role is what changed — typically replaced by another project
// applying a Role of the same name. The API server's 403 message names the user, verb, resource,
// group and namespace (k8s.io/apiserver's forbidden message), so no further request is needed.
import type { ApiError } from "../clients/kube-errors.ts";

/** What a 403 from the RBAC authorizer says, when its message has the usual form. */
export interface Forbidden {
  user: string;
  verb: string;
  resource: string;
  group: string;
  namespace?: string;
}

const FORBIDDEN = /User "([^"]*)" cannot (\S+) resource "([^"]+)" in API group "([^"]*)"(?: in the namespace "([^"]+)")?/;

/** The parts of an RBAC 403 message, or undefined when it has another form. */
export function parseForbidden(message: string): Forbidden | undefined {
  const m = FORBIDDEN.exec(message);
  if (!m) return undefined;
  return { user: m[1]!, verb: m[2]!, resource: m[3]!, group: m[4]!, ...(m[5] ? { namespace: m[5] } : {}) };
}

/** The one line for a refusal of the bridge's request; `credentialSource` says where its credential comes from. */
export function refusalLine(e: Pick<ApiError, "code" | "reason" | "message">, credentialSource: string): string {
  const f = e.code === 403 ? parseForbidden(e.message) : undefined;
  if (e.code === 401 || f?.user === "system:anonymous")
    return `the API server refused the bridge's credential (${e.code} ${e.reason}): check ${credentialSource}`;
  if (!f)
    return `the API server forbade the bridge's request (${e.code} ${e.reason}: ${e.message.slice(0, 300)}): its credential was accepted (${credentialSource}); its identity lacks a grant — was its Role changed or replaced?`;
  const what = `${f.resource}${f.group ? `.${f.group}` : ""}`;
  const where = f.namespace ? `in namespace ${f.namespace}` : "cluster-wide";
  return `the bridge's identity ${f.user} is not allowed to ${f.verb} ${what} ${where} (${e.code} ${e.reason}): its credential (${credentialSource}) was accepted, but its Role was changed or replaced — was it reapplied by another project (one bridge identity per project: crdfn-bridge-<project>)?`;
}
