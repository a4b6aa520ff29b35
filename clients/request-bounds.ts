// How long an AWS SDK request may take before it is an outage. The SDK's HTTP handler (smithy
// 4.x) only warns when `requestTimeout` passes unless `throwOnRequestTimeout` is set: a server that
// accepts the connection and never answers would hold the caller for good. Every client crdfn
// bounds goes through here so that none forgets the flag.
import type { NodeHttpHandlerOptions } from "@smithy/types";

export function boundedRequests(connectionTimeoutMs: number, requestTimeoutMs: number): NodeHttpHandlerOptions {
  return { connectionTimeout: connectionTimeoutMs, requestTimeout: requestTimeoutMs, throwOnRequestTimeout: true };
}
