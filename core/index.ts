// What an operator author imports: `import { defineOperator, PermanentError } from "crdfn"`.
export { defineOperator, pluralOf, apiVersionOf } from "./operator.ts";
export type {
  CustomObject,
  DesiredObject,
  FinalizeContext,
  FinalizeResult,
  ObjectMeta,
  ObjectReference,
  ObservedChildren,
  ObservedObject,
  Operator,
  OperatorDefinition,
  OwnedKind,
  SharedObject,
  PrinterColumn,
  ReconcileContext,
  ReconcileResult,
  ResourceDefinition,
  ResourceVersion,
  ScaleSubresource,
  Scope,
  StatusInput,
} from "./operator.ts";
export { PermanentError, TemporaryError } from "./errors.ts";
export { cel, embedded, freeForm, immutable } from "./crd-validation.ts";
export type { CelOptions, CelReason, CelRule } from "./crd-validation.ts";
export type { Condition, ConditionInput, ConditionStatus } from "./conditions.ts";
