// What an operator author imports: `import { defineOperator, PermanentError } from "crdfn"`.
export { defineOperator, pluralOf, apiVersionOf } from "./operator.ts";
export type {
  AwsPermission,
  CloudPermissions,
  CustomObject,
  DesiredObject,
  EffectsContext,
  EffectsResult,
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
  ReadKind,
  ReconcileContext,
  ReferencedObjects,
  ReferenceName,
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
