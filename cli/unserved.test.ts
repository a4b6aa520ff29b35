import assert from "node:assert/strict";
import { test } from "node:test";
import { unservedLine, unservedNote } from "./unserved.ts";

test("the note names the served namespaces, the one not served and how to serve it", () => {
  assert.equal(
    unservedNote({ kind: "Motd", namespace: "team-b" }, ["default", "demo"]),
    "crdfn: Motd objects are reconciled only in namespaces default, demo; namespace team-b is not served, so this object is never reconciled (move it, or add team-b to namespaces: in crdfn.deploy.yaml / crdfn dev --namespace)",
  );
});

test("dev's line is one line naming the object", () => {
  const line = unservedLine({ apiVersion: "example.com/v1", kind: "Motd", namespace: "team-b", name: "hello", uid: "u" }, ["default"]);
  assert.match(line, /^⚠ Motd team-b\/hello not served: Motd objects are reconciled only in namespace default; namespace team-b is not served/);
  assert.doesNotMatch(line, /\n/);
});
