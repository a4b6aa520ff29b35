// One trace per change (issue 51), shared by the bridge and the functions: the tracer their entry
// files build from the standard OTEL_* environment and pass in, as they pass the logger and the
// clock, and the W3C trace context as the key event carries it (core/event.ts traceparent).
//
// Off unless an OTLP endpoint is set: the tracer is then OpenTelemetry's no-op one, and the SDK
// and the exporter are never loaded (a Lambda's cold start pays nothing for them).
import { ProxyTracerProvider, ROOT_CONTEXT, trace, type Context, type Span, type Tracer } from "@opentelemetry/api";
import { W3CTraceContextPropagator } from "@opentelemetry/core";
import { ConfigError } from "../core/config-error.ts";

/** What the tracing of one process is: its tracer, and how to get its spans out before it stops. */
export interface Tracing {
  readonly tracer: Tracer;
  /** Whether spans are exported at all: callers skip work that only feeds a span. */
  readonly enabled: boolean;
  /**
   * Exports the spans ended so far, giving up after `timeoutMs`: a Lambda is frozen once its
   * invocation returns, so it flushes before; a collector down never fails or stalls the work.
   */
  flush(timeoutMs: number): Promise<void>;
  /** Flushes and stops exporting. */
  shutdown(timeoutMs: number): Promise<void>;
}

/** The standard samplers (OTEL_TRACES_SAMPLER); parent-based ones keep one decision for a whole change. */
const SAMPLERS = ["always_on", "always_off", "traceidratio", "parentbased_always_on", "parentbased_always_off", "parentbased_traceidratio"] as const;
type SamplerName = (typeof SAMPLERS)[number];

export interface TracingSettings {
  /** Where spans go: an OTLP/HTTP traces URL (…/v1/traces), protobuf encoded. */
  url: string;
  serviceName: string;
  sampler: SamplerName;
  /** OTEL_TRACES_SAMPLER_ARG, for the ratio samplers. */
  ratio: number;
}

/**
 * The tracing an environment asks for, or undefined (off): on only with
 * OTEL_EXPORTER_OTLP_TRACES_ENDPOINT (the URL as given) or OTEL_EXPORTER_OTLP_ENDPOINT (plus
 * /v1/traces), as the OpenTelemetry specification reads them; OTEL_SDK_DISABLED=true or
 * OTEL_TRACES_EXPORTER=none turn it off. Headers (OTEL_EXPORTER_OTLP_HEADERS…) the exporter reads itself.
 */
export function tracingSettings(env: Readonly<Record<string, string | undefined>>, defaultServiceName: string): TracingSettings | undefined {
  const set = (name: string): string | undefined => (env[name]?.trim() ? env[name].trim() : undefined);
  if (set("OTEL_SDK_DISABLED")?.toLowerCase() === "true" || set("OTEL_TRACES_EXPORTER")?.toLowerCase() === "none") return undefined;
  const base = set("OTEL_EXPORTER_OTLP_ENDPOINT");
  const url = set("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") ?? (base === undefined ? undefined : `${base.replace(/\/+$/, "")}/v1/traces`);
  if (url === undefined) return undefined;
  if (!URL.canParse(url)) throw new ConfigError(`OTEL_EXPORTER_OTLP_ENDPOINT: not a URL: ${url}`);
  const sampler = (set("OTEL_TRACES_SAMPLER")?.toLowerCase() ?? "parentbased_always_on") as SamplerName;
  if (!SAMPLERS.includes(sampler)) throw new ConfigError(`OTEL_TRACES_SAMPLER: "${sampler}" is none of ${SAMPLERS.join(", ")}`);
  const arg = set("OTEL_TRACES_SAMPLER_ARG");
  const ratio = arg === undefined ? 1 : Number(arg);
  if (!(ratio >= 0 && ratio <= 1)) throw new ConfigError(`OTEL_TRACES_SAMPLER_ARG: a ratio from 0 to 1, not "${arg}"`);
  return { url, serviceName: set("OTEL_SERVICE_NAME") ?? defaultServiceName, sampler, ratio };
}

/** Tracing off: OpenTelemetry's no-op tracer, from a provider of its own (no global is set or read). */
export function tracingOff(): Tracing {
  return { tracer: new ProxyTracerProvider().getTracer("crdfn"), enabled: false, flush: async () => {}, shutdown: async () => {} };
}

/** How long a flush waits while the collector is known to be down (its last flush failed or timed out). */
export const DOWN_FLUSH_MS = 50;

/** The tracing `settings` ask for; off when undefined. Only entry files call it. */
export async function startTracing(settings: TracingSettings | undefined): Promise<Tracing> {
  if (settings === undefined) return tracingOff();
  const [sdk, { OTLPTraceExporter }, { resourceFromAttributes }] = await Promise.all([
    import("@opentelemetry/sdk-trace"),
    import("@opentelemetry/exporter-trace-otlp-proto"),
    import("@opentelemetry/resources"),
  ]);
  const root = settings.sampler.endsWith("always_off")
    ? new sdk.AlwaysOffSampler()
    : settings.sampler.endsWith("traceidratio")
      ? new sdk.TraceIdRatioBasedSampler(settings.ratio)
      : new sdk.AlwaysOnSampler();
  const provider = new sdk.TracerProvider({
    resource: resourceFromAttributes({ "service.name": settings.serviceName }),
    sampler: settings.sampler.startsWith("parentbased_") ? new sdk.ParentBasedSampler({ root }) : root,
    spanProcessors: [new sdk.BatchSpanProcessor({ exporter: new OTLPTraceExporter({ url: settings.url }) })],
  });
  const bounded = async (work: (timeoutMillis: number) => Promise<void>, timeoutMs: number): Promise<boolean> => {
    let timer: NodeJS.Timeout | undefined;
    try {
      return await Promise.race([
        work(timeoutMs).then(
          () => true,
          () => false,
        ),
        new Promise<boolean>((resolve) => (timer = setTimeout(() => resolve(false), timeoutMs))),
      ]);
    } finally {
      clearTimeout(timer);
    }
  };
  // A collector found down (a flush that failed or ran out of its time) is waited for only
  // briefly until an export gets through again: a Lambda flushing after every invocation would
  // otherwise pay the whole bound each time (the exporter retries a refused connection itself).
  let down = false;
  const flush = async (timeoutMs: number): Promise<void> => {
    const done = await bounded(
      (timeoutMillis) => {
        const exported = provider.forceFlush({ timeoutMillis });
        exported.then(
          () => (down = false),
          () => (down = true),
        );
        return exported;
      },
      Math.min(timeoutMs, down ? DOWN_FLUSH_MS : timeoutMs),
    );
    if (!done) down = true;
  };
  return {
    tracer: provider.getTracer("crdfn"),
    enabled: true,
    flush,
    shutdown: async (timeoutMs) => {
      await bounded(() => provider.shutdown(), timeoutMs);
    },
  };
}

/** The W3C trace context as a key event carries it. */
export interface TraceFields {
  traceparent?: string;
  tracestate?: string;
}

const propagator = new W3CTraceContextPropagator();
const fieldGetter = {
  keys: (carrier: TraceFields) => Object.keys(carrier),
  get: (carrier: TraceFields, key: string) => (key === "traceparent" ? carrier.traceparent : key === "tracestate" ? carrier.tracestate : undefined),
};

/** The context a span continues from the fields (a verified event's, an object's annotation); the root context without them. */
export function contextFrom(fields: TraceFields): Context {
  return fields.traceparent === undefined ? ROOT_CONTEXT : propagator.extract(ROOT_CONTEXT, fields, fieldGetter);
}

/**
 * The fields that carry `span`'s context onwards, its sampling decision included (a parent-based
 * sampler downstream keeps it); none for tracing off (a no-op span has no valid context).
 */
export function fieldsOf(span: Span): TraceFields {
  if (!trace.isSpanContextValid(span.spanContext())) return {};
  const carrier: TraceFields = {};
  propagator.inject(trace.setSpan(ROOT_CONTEXT, span), carrier, {
    set: (c: TraceFields, key: string, value: string) => {
      if (key === "traceparent" || key === "tracestate") c[key] = value;
    },
  });
  return carrier;
}

/** `parent` with `span` as its active span: what a child span starts from. */
export const within = (parent: Context, span: Span): Context => trace.setSpan(parent, span);
