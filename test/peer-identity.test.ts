// The benchmarks' peer operators run as they are deployed: under a ServiceAccount with the
// ClusterRole kubebuilder generates (bench/peers/identity.ts). Proven with the written kubeconfig
// as the peer would use it: the API server names the ServiceAccount, and it may write what the
// role grants and nothing else.
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { promisify } from "node:util";
import { kubebuilderRules, peerIdentity, type PeerIdentity } from "../bench/peers/identity.ts";
import { startReaper, type Reaper } from "../emulator/reaper.ts";
import { slugOf, testCluster, type TestCluster } from "./support/test-cluster.ts";

const run = promisify(execFile);

describe("a benchmark's peer operator identity", { timeout: 120_000 }, () => {
  let cluster: TestCluster;
  let reaper: Reaper;
  let identity: PeerIdentity;
  const as = (kubeconfig: string, args: string[]) => run(cluster.kubectl, args, { env: { ...process.env, KUBECONFIG: kubeconfig } });

  before(async () => {
    cluster = await testCluster({ file: import.meta.filename });
    reaper = startReaper();
    identity = await peerIdentity(
      cluster,
      slugOf(import.meta.filename),
      kubebuilderRules({ group: "example.com", plural: "greetings" }),
      reaper,
      cluster.namespace,
    );
  });
  after(async () => {
    await run(cluster.kubectl, ["delete", "clusterrole,clusterrolebinding", `${slugOf(import.meta.filename)}-manager`, "--ignore-not-found"], {
      env: { ...process.env, KUBECONFIG: cluster.kubeconfigPath },
    }).catch(() => undefined);
    await reaper?.release();
    await cluster?.stop();
  });

  it("is the ServiceAccount, not the admin", async () => {
    const { stdout } = await as(identity.kubeconfigPath, ["auth", "whoami", "-o", "jsonpath={.status.userInfo.username}"]);
    assert.equal(stdout, identity.username);
    assert.match(identity.username, /^system:serviceaccount:/);
  });

  it("writes the ConfigMaps its role grants, and no Secret", async () => {
    await as(identity.kubeconfigPath, ["create", "configmap", "granted", "-n", cluster.namespace]);
    await assert.rejects(as(identity.kubeconfigPath, ["create", "secret", "generic", "refused", "-n", cluster.namespace]), /forbidden/i);
    const { stdout } = await as(cluster.kubeconfigPath, ["get", "configmap,secret", "-n", cluster.namespace, "-o", "name"]);
    const names = stdout.split("\n");
    assert.ok(names.includes("configmap/granted"), stdout);
    assert.ok(!names.includes("secret/refused"), stdout);
  });
});
