import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { ServerReadiness, type ReadyzAnswer } from "./server-readiness.ts";

// The decision table of "is this 401/403 the server's warm-up?", with scripted /readyz answers
// and a fake clock; kube-http.test.ts proves the client asks and types its errors accordingly.
describe("ServerReadiness", () => {
  const readiness = (anonymous: ReadyzAnswer, authenticated: ReadyzAnswer, clock = { t: 0 }) => {
    const asked = { anonymous: 0, authenticated: 0 };
    const r = new ServerReadiness({
      anonymous: () => (asked.anonymous++, Promise.resolve(anonymous)),
      authenticated: () => (asked.authenticated++, Promise.resolve(authenticated)),
      now: () => clock.t,
    });
    return { r, asked };
  };

  it("lets a refusal stand when the server says it is ready, to anyone or to the client", async () => {
    assert.equal(await readiness(200, 500).r.notReadyReason(), undefined);
    const { r, asked } = readiness(401, 200); // anonymous requests turned off
    assert.equal(await r.notReadyReason(), undefined);
    assert.deepEqual(asked, { anonymous: 1, authenticated: 1 });
  });

  it("takes a refusal for an outage while /readyz fails or goes unanswered", async () => {
    assert.match((await readiness(500, 200).r.notReadyReason()) ?? "", /readyz answered 500/);
    assert.match((await readiness("unreachable", 200).r.notReadyReason()) ?? "", /readyz answered unreachable/);
  });

  it("tells RBAC not in force yet (403 to an authenticated identity) from a refused credential (401)", async () => {
    assert.match((await readiness(403, 403).r.notReadyReason()) ?? "", /RBAC is not in force yet/);
    assert.equal(await readiness(403, 401).r.notReadyReason(), undefined);
  });

  it("asks once for a burst of refusals", async () => {
    const clock = { t: 0 };
    const { r, asked } = readiness(500, 200, clock);
    await Promise.all([r.notReadyReason(), r.notReadyReason(), r.notReadyReason()]);
    clock.t = 500;
    await r.notReadyReason();
    assert.equal(asked.anonymous, 1);
    clock.t = 1500;
    await r.notReadyReason();
    assert.equal(asked.anonymous, 2);
  });

  it("takes a refusal within the window after the server's return for its warm-up, without asking, and only then", async () => {
    const clock = { t: 0 };
    const { r, asked } = readiness(200, 200, clock);
    r.sawAnswer(); // answers all along: no return
    assert.equal(await r.notReadyReason(), undefined);
    r.sawUnreachable();
    clock.t = 5000;
    r.sawAnswer();
    clock.t = 14_000;
    assert.match((await r.notReadyReason()) ?? "", /answered again 9000 ms ago/);
    assert.equal(asked.anonymous, 1);
    clock.t = 15_001;
    assert.equal(await r.notReadyReason(), undefined);
  });
});
