// What an operator author imports to test without a cluster: `import { testObject } from "crdfn/testing"`.
export { testObject, TestObjectSpecError } from "./object.ts";
export type { TestObjectInput } from "./object.ts";
