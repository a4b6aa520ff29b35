// crdfn/testing: test a reconcile without a cluster. `testObject` builds a typed object from the
// operator's schema; `reconcileWithRuntime` runs the whole runtime path against
// `createFakeKube()`, an in-memory API server; `reconcileContext`, `effectsContext` and
// `finalizeContext` are for calling reconcile, effects and finalize directly.
export { testObject, TestObjectSpecError } from "./object.ts";
export type { TestObjectInput } from "./object.ts";
export { createFakeKube, type FakeKube } from "./fake-kube.ts";
export { reconcileWithRuntime, type ObjectInput, type RunOptions, type RunResult } from "./run.ts";
export { effectsContext, finalizeContext, reconcileContext, type ObjectsByKind } from "./context.ts";
