// What the deploy files give the bridge and the functions of `tracing:` in crdfn.deploy.yaml: the
// standard OpenTelemetry variables (clients/tracing.ts reads them), and nothing without an
// endpoint, so a deploy that never asked for tracing exports nothing and loads no SDK.
//
// The bridge decides once per change (parentbased_traceidratio at the ratio); the functions
// follow the decision their event carries (the default parent-based sampler), so a change is
// traced whole or not at all.

/** `tracing:` as parsed (deploy/settings.ts). */
export interface TracingDeploySettings {
  /** OTLP/HTTP base URL the bridge exports to, e.g. an OpenTelemetry Collector in the cluster. */
  endpoint?: string | undefined;
  /** The functions' (on Lambda the ADOT layer's collector, http://localhost:4318). Default: endpoint. */
  functionsEndpoint?: string | undefined;
  /** The share of changes traced. */
  sampleRatio: number;
}

export function bridgeTracingEnv(t: TracingDeploySettings | undefined): Record<string, string> {
  if (t?.endpoint === undefined) return {};
  return {
    OTEL_EXPORTER_OTLP_ENDPOINT: t.endpoint,
    OTEL_TRACES_SAMPLER: "parentbased_traceidratio",
    OTEL_TRACES_SAMPLER_ARG: String(t.sampleRatio),
  };
}

export function functionTracingEnv(t: TracingDeploySettings | undefined): Record<string, string> {
  const endpoint = t?.functionsEndpoint ?? t?.endpoint;
  return endpoint === undefined ? {} : { OTEL_EXPORTER_OTLP_ENDPOINT: endpoint };
}
