import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, readdirSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { POLICY_FRAMES, POLICY_SITES, REQUEST_CATEGORIES, startApiServerProfile, summarise, traceCategories } from "./api-server-profile.ts";

// As `go tool pprof -top -cum` prints an API server's profile (trimmed; names shortened where they do not matter).
const top = `File: kube-apiserver
Type: cpu
Duration: 20.01s, Total samples = 27.88s (139.36%)
Showing nodes accounting for 27.88s, 100% of 27.88s total
      flat  flat%   sum%        cum   cum%
         0     0%     0%      5.21s 18.69%  k8s.io/apiserver/pkg/admission/plugin/policy/validating.(*validator).Validate
         0     0%     0%      2.72s  9.76%  k8s.io/apiserver/pkg/admission/plugin/cel.newActivation
     0.02s  0.07%  0.07%      930ms  3.34%  k8s.io/apiserver/pkg/admission/plugin/webhook/matchconditions.(*matcher).Match
         0     0%  0.07%      1.77s  6.35%  k8s.io/apiserver/pkg/admission/plugin/policy/validating.(*validator).Validate k8s.io/apiserver@v0.34.4/pkg/admission/plugin/policy/validating/validator.go:109
         0     0%  0.07%      1.73s  6.21%  k8s.io/apiserver/pkg/admission/plugin/policy/validating.(*validator).Validate k8s.io/apiserver@v0.34.4/pkg/admission/plugin/policy/validating/validator.go:122
`;

describe("the API server's profile, summarised", () => {
  it("reads the total and each frame's cumulative time, in seconds whatever the unit", () => {
    const { totalSeconds, seconds } = summarise(top, POLICY_FRAMES);
    assert.equal(totalSeconds, 27.88);
    assert.deepEqual(seconds, { policy: 5.21, activation: 2.72, matchConditions: 0.93 });
  });

  it("reads a call site by its line, and a frame the profile lacks as 0", () => {
    const { seconds } = summarise(top, POLICY_SITES);
    assert.deepEqual(seconds, { validations: 1.77, messages: 1.73, auditAnnotations: 0 });
  });
});

// As `go tool pprof -traces` prints samples: a separator, the sample's time and its leaf, then its callers.
const traces = `File: kube-apiserver
Type: cpu
-----------+-------------------------------------------------------
      20ms   runtime.mallocgc
             k8s.io/apiserver/pkg/admission/plugin/cel.newActivation
             k8s.io/apiserver/pkg/admission/plugin/policy/validating.(*validator).Validate
             k8s.io/apiserver/pkg/endpoints/handlers.(*patcher).patchResource.func2
             k8s.io/apiserver/pkg/endpoints/handlers/finisher.finishRequest.func1
-----------+-------------------------------------------------------
      30ms   k8s.io/apiserver/pkg/storage/etcd3.(*store).updateState
             k8s.io/apiserver/pkg/endpoints/handlers.(*patcher).patchResource.func2
             k8s.io/apiserver/pkg/endpoints/handlers/finisher.finishRequest.func1
-----------+-------------------------------------------------------
     1.5s   k8s.io/apiextensions-apiserver/pkg/registry/customresource.(*StatusREST).Update
             k8s.io/apiextensions-apiserver/pkg/apiserver.(*crdHandler).serveStatus.UpdateResource.func2.5
-----------+-------------------------------------------------------
      10ms   runtime.scanobject
             runtime.gcBgMarkWorker
-----------+-------------------------------------------------------
      10ms   syscall.Syscall
-----------+-------------------------------------------------------
`;

describe("the API server's samples by category", () => {
  it("counts each sample once, in the first category a frame of its stack matches", () => {
    const { totalSeconds, seconds } = traceCategories(traces, REQUEST_CATEGORIES);
    assert.equal(Math.round(totalSeconds * 1000), 1570);
    assert.equal(Math.round(seconds.policy! * 1000), 20, "the policy before the patch it runs in");
    assert.equal(Math.round(seconds.patch! * 1000), 30);
    assert.equal(Math.round(seconds.update! * 1000), 1500, "a custom resource's status PUT, by apiextensions' handler");
    assert.equal(Math.round(seconds.gc! * 1000), 10);
    assert.equal(Math.round(seconds.other! * 1000), 10);
    assert.equal(seconds.create, 0);
  });
});

describe("profiling the API server", () => {
  it("lets the work it measures run on when a profile fails, and says why at the stop", async () => {
    const dir = mkdtempSync(join(tmpdir(), "crdfn-profile-test-"));
    // A kubectl that fails at once, as one would against a server that refuses the admin's profile.
    // The first part starts at once; the stop waits for it, whenever it ends.
    const profiling = startApiServerProfile({ kubectl: "false", kubeconfigPath: join(dir, "kubeconfig") }, join(dir, "p.pb.gz"));
    await assert.rejects(profiling.stopByCategory(REQUEST_CATEGORIES), /the API server's CPU profile: kubectl exited 1/);
    assert.deepEqual(readdirSync(dir), ["p.pb.gz.1"], "one part was tried, and the loop stopped");
  });
});
