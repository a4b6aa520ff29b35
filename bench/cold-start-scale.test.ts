import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { categoryComparison, categoryProfile } from "./cold-start-scale.ts";

describe("bench:coldscale's profile of the API server", () => {
  it("gives each category's ms per object, and crdfn's against controller-runtime's in one line", () => {
    const crdfn = categoryProfile("c.pb.gz", 87.5, { patch: 30, update: 25, get: 7, policy: 9, other: 1 }, 10_000);
    const cr = categoryProfile("r.pb.gz", 60.2, { create: 18, patch: 22 }, 10_000);
    assert.equal(crdfn.sampledMsPerObject, 8.75);
    assert.equal(crdfn.msPerObject.policy, 0.9);
    const line = categoryComparison(10_000, crdfn, cr);
    assert.match(
      line,
      /^N = 10000: API server ms per object, crdfn against controller-runtime\(8\), profiled: all 8\.75 against 6\.02; policy 0\.9 against 0 \(\+0\.9\), /,
    );
    assert.match(line, /create 0 against 1\.8 \(-1\.8\), patch 3 against 2\.2 \(\+0\.8\), update 2\.5 against 0 \(\+2\.5\), get 0\.7 against 0 \(\+0\.7\)/);
    assert.match(line, /, other 0\.1 against 0 \(\+0\.1\)$/);
  });
});
