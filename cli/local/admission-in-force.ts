// When the admission policies written or deleted so far are in force. The API server loads
// policies and bindings through informers, each in the order they were written, so a change takes
// effect a moment after the write. A probe policy written last — refusing a ConfigMap by a name
// nobody uses — is loaded only after everything written before it: once a server-side dry run
// (which writes nothing) is refused by it, every earlier change is in force too.
import type { KubeHttp } from "../../clients/kube-http.ts";
import { SetupError } from "../../emulator/errors.ts";

const ADMISSION = "/apis/admissionregistration.k8s.io/v1";

export async function untilAdmissionInForce(http: KubeHttp, o: { probe: string; namespace: string; timeoutMs?: number }): Promise<void> {
  const { probe, namespace } = o;
  const said = `${probe}: the policies before me are loaded`;
  const policy = {
    apiVersion: "admissionregistration.k8s.io/v1",
    kind: "ValidatingAdmissionPolicy",
    metadata: { name: probe },
    spec: {
      failurePolicy: "Fail",
      matchConstraints: { resourceRules: [{ apiGroups: [""], apiVersions: ["v1"], resources: ["configmaps"], operations: ["CREATE"] }] },
      validations: [{ expression: `object.metadata.name != '${probe}'`, message: said, reason: "Forbidden" }],
    },
  };
  const binding = {
    apiVersion: "admissionregistration.k8s.io/v1",
    kind: "ValidatingAdmissionPolicyBinding",
    metadata: { name: probe },
    spec: { policyName: probe, validationActions: ["Deny"] },
  };
  const apply = async (plural: string, body: unknown): Promise<void> => {
    const r = await http.request("PATCH", `${ADMISSION}/${plural}/${probe}`, {
      body,
      contentType: "application/apply-patch+yaml",
      query: { fieldManager: "crdfn-admission-probe", force: "true" },
    });
    if (r.status >= 300) throw new SetupError(`writing the admission probe ${plural}/${probe}: HTTP ${r.status} ${r.text.slice(0, 200)}`);
  };
  await apply("validatingadmissionpolicies", policy);
  await apply("validatingadmissionpolicybindings", binding);
  const timeoutMs = o.timeoutMs ?? 60_000;
  const deadline = Date.now() + timeoutMs;
  try {
    for (;;) {
      const { status, text } = await http.request("POST", `/api/v1/namespaces/${namespace}/configmaps`, {
        body: { apiVersion: "v1", kind: "ConfigMap", metadata: { name: probe } },
        query: { dryRun: "All" },
      });
      if (text.includes(said)) return;
      if (Date.now() > deadline)
        throw new SetupError(`the admission policies did not take effect within ${timeoutMs / 1000} s (the probe answered ${status}: ${text.slice(0, 300)})`);
      await new Promise((r) => setTimeout(r, 250));
    }
  } finally {
    await http.request("DELETE", `${ADMISSION}/validatingadmissionpolicybindings/${probe}`).catch(() => undefined);
    await http.request("DELETE", `${ADMISSION}/validatingadmissionpolicies/${probe}`).catch(() => undefined);
  }
}
