import assert from "node:assert/strict";
import { test } from "node:test";
import { parseForbidden, refusalLine } from "./refusal.ts";

const source = "the dev bridge identity's ServiceAccount token";

test("a 401 is the credential refused", () => {
  assert.equal(
    refusalLine({ code: 401, reason: "Unauthorized", message: "GET /apis/x: 401 Unauthorized" }, source),
    `the API server refused the bridge's credential (401 Unauthorized): check ${source}`,
  );
});

test("a 403 to system:anonymous is the credential not accepted either", () => {
  const message =
    'GET /apis/example.com/v1/namespaces/default/motds: 403 motds.example.com is forbidden: User "system:anonymous" cannot list resource "motds" in API group "example.com" in the namespace "default"';
  assert.match(refusalLine({ code: 403, reason: "Forbidden", message }, source), /^the API server refused the bridge's credential \(403 Forbidden\): check /);
});

test("a 403 naming the identity is its Role changed, naming identity, verb, resource and namespace", () => {
  const message =
    'GET /apis/example.com/v1/namespaces/default/motds: 403 motds.example.com is forbidden: User "system:serviceaccount:crdfn-system:crdfn-bridge-a" cannot watch resource "motds" in API group "example.com" in the namespace "default"';
  const line = refusalLine({ code: 403, reason: "Forbidden", message }, source);
  assert.equal(
    line,
    `the bridge's identity system:serviceaccount:crdfn-system:crdfn-bridge-a is not allowed to watch motds.example.com in namespace default (403 Forbidden): its credential (${source}) was accepted, but its Role was changed or replaced — was it reapplied by another project (one bridge identity per project: crdfn-bridge-<project>)?`,
  );
  assert.doesNotMatch(line, /refused the bridge's credential/);
});

test("a cluster-scoped 403 and the core group", () => {
  assert.deepEqual(parseForbidden('configmaps is forbidden: User "u" cannot list resource "configmaps" in API group "" at the cluster scope'), {
    user: "u",
    verb: "list",
    resource: "configmaps",
    group: "",
  });
});

test("a 403 of another form still says the credential was accepted", () => {
  assert.match(refusalLine({ code: 403, reason: "Forbidden", message: "denied by webhook" }, source), /forbade the bridge's request .*credential was accepted/);
});
