import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { operatorRequests, parseOpenWatches, parseRequestCounts, parseRequestSeconds, requestDelta, serverMsPerRequest } from "./api-requests.ts";

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

  it("the server's own time: seconds summed the same way, a mean per request of each key asked for", () => {
    const text = `apiserver_request_duration_seconds_sum{component="apiserver",dry_run="",group="",resource="configmaps",scope="resource",subresource="",verb="APPLY",version="v1"} 0.5
apiserver_request_duration_seconds_sum{component="apiserver",dry_run="",group="",resource="configmaps",scope="resource",subresource="",verb="APPLY",version="v1"} 0.25
apiserver_request_duration_seconds_count{component="apiserver",resource="configmaps",verb="APPLY"} 99
apiserver_request_total{code="200",resource="configmaps",verb="APPLY"} 150
`;
    const seconds = parseRequestSeconds(text);
    assert.deepEqual(seconds, { "APPLY configmaps": 0.75 });
    assert.deepEqual(serverMsPerRequest(parseRequestCounts(text), seconds, ["APPLY configmaps", "PUT leases"]), { "APPLY configmaps": 5 });
  });

  it("counts only the named resources when given", () => {
    assert.equal(operatorRequests({ "PATCH greeting0s": 2, "PUT greeting0s/status": 1, "PUT greetings/status": 5 }, ["greeting0s", "greeting0s/status"]), 3);
  });

  it("open watches: the WATCH gauge by resource, summed over groups and scopes; other verbs left out", () => {
    const text = `# TYPE apiserver_longrunning_requests gauge
apiserver_longrunning_requests{component="apiserver",group="",resource="configmaps",scope="namespace",subresource="",verb="WATCH",version="v1"} 10
apiserver_longrunning_requests{component="apiserver",group="",resource="configmaps",scope="cluster",subresource="",verb="WATCH",version="v1"} 2
apiserver_longrunning_requests{component="apiserver",group="bench.crdfn.dev",resource="greeting0s",scope="namespace",subresource="",verb="WATCH",version="v1"} 1
apiserver_longrunning_requests{component="apiserver",group="",resource="pods",scope="namespace",subresource="exec",verb="CONNECT",version="v1"} 4
apiserver_request_total{code="200",resource="configmaps",verb="WATCH"} 99
`;
    assert.deepEqual(parseOpenWatches(text), { configmaps: 12, greeting0s: 1 });
  });
});
