// A traced run's collector: an OTLP/HTTP receiver in the driver (its decoding is charged to the
// driver, not to crdfn, as a collector runs elsewhere in production), the environment that points
// crdfn's bridge and functions at it (clients/tracing.ts reads it), and the stage breakdown of a
// phase once its spans are in.
import { startOtlpReceiver } from "../test/support/otlp-receiver.ts";
import { stageBreakdown, type StageBreakdown } from "./stages.ts";

export interface Phase {
  /** Epoch ms: the bridge's spans carry wall-clock time. */
  fromMs: number;
  toMs: number;
}

export interface SpanCollector {
  /** For crdfn's child process: its bridge and functions inherit it. */
  env: Record<string, string>;
  /** Marks a phase's start; `end()` its end. */
  phase(): { end(): Phase };
  /** The breakdown of the changes the bridge began in `phase`; call once the system has stopped (its last spans flushed). */
  breakdown(phase: Phase): StageBreakdown & { spans: number; exports: number };
  close(): Promise<void>;
}

export async function startSpanCollector(): Promise<SpanCollector> {
  const receiver = await startOtlpReceiver();
  return {
    env: { OTEL_EXPORTER_OTLP_ENDPOINT: receiver.endpoint },
    phase() {
      const fromMs = Date.now();
      return { end: () => ({ fromMs, toMs: Date.now() }) };
    },
    breakdown: (phase) => ({ ...stageBreakdown(receiver.spans, phase), spans: receiver.spans.length, exports: receiver.requests }),
    close: () => receiver.close(),
  };
}
