// crdfn/testing: test a reconcile without a cluster. `reconcileWithRuntime` runs the whole
// runtime path against `createFakeKube()`, an in-memory API server.
export { createFakeKube, type FakeKube } from "./fake-kube.ts";
export { reconcileWithRuntime, type ObjectInput, type RunOptions, type RunResult } from "./run.ts";
export { reconcileContext } from "./context.ts";
