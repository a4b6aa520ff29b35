import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { operatorRequests, parseRequestCounts, requestDelta } from "./api-requests.ts";

const metrics = (greetings: number, status: number) => `# HELP apiserver_request_total Counter of apiserver requests
# TYPE apiserver_request_total counter
apiserver_request_total{code="200",component="apiserver",dry_run="",group="example.com",resource="greetings",scope="resource",subresource="",verb="PATCH",version="v1"} ${greetings}
apiserver_request_total{code="409",component="apiserver",dry_run="",group="example.com",resource="greetings",scope="resource",subresource="",verb="PATCH",version="v1"} 2
apiserver_request_total{code="200",component="apiserver",dry_run="",group="example.com",resource="greetings",scope="resource",subresource="status",verb="PUT",version="v1"} ${status}
apiserver_request_total{code="200",component="apiserver",dry_run="",group="coordination.k8s.io",resource="leases",scope="resource",subresource="",verb="PUT",version="v1"} 7
apiserver_request_duration_seconds_count{verb="GET"} 99
`;

describe("API server request counts", () => {
  it("sums codes by verb and (sub)resource and keeps other metrics out", () => {
    assert.deepEqual(parseRequestCounts(metrics(10, 4)), { "PATCH greetings": 12, "PUT greetings/status": 4, "PUT leases": 7 });
  });

  it("a delta holds only what grew; an operator's requests leave the control plane's chatter out", () => {
    const delta = requestDelta(parseRequestCounts(metrics(10, 4)), parseRequestCounts(metrics(15, 9)));
    assert.deepEqual(delta, { "PATCH greetings": 5, "PUT greetings/status": 5 });
    assert.equal(operatorRequests({ ...delta, "PUT leases": 3 }), 10);
  });
});
