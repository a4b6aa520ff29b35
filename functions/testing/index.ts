// crdfn/testing: test a reconcile without a cluster, with the runtime's semantics. `testObject`
// builds a typed object from the operator's schema; `reconcileContext(operator, …)`,
// `effectsContext(operator, …)` and `finalizeContext` are for calling reconcile, effects and
// finalize directly; `reconcileWithRuntime` runs the whole runtime path against
// `createFakeKube()`, an in-memory API server. testObject and reconcileWithRuntime take one object
// shape: `{ metadata: { name }, spec }`, as a manifest writes it.
export { testObject, TestObjectSpecError } from "./object.ts";
export type { ObjectInput, TestObjectInput } from "./object.ts";
export { createFakeKube, type FakeKube } from "./fake-kube.ts";
export { reconcileWithRuntime, type OtherObject, type RunOptions, type RunResult } from "./run.ts";
export {
  effectsContext,
  finalizeContext,
  reconcileContext,
  type ContextBuilder,
  type ContextOptions,
  type EffectsContextOptions,
  type FinalizeContextOptions,
  type ObjectsByKind,
} from "./context.ts";
