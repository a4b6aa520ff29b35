// The steps of one handling as spans of its change's trace (issue 51): each a child of the
// "function handle" span, and every API request made during a step a child of that step's span
// (clients/kube-http.ts). The names are a contract: the benchmarks' stage breakdown and the trace
// views find a change's stages by them.
//
// The context is passed explicitly, never through a global context manager (none is registered):
// one handling's steps run one after another, so "the step running now" is one value per
// handling, read by its API at each request. Untraced, a step is its work called as it is.
import { SpanStatusCode, trace, type Attributes, type Context, type Span, type Tracer } from "@opentelemetry/api";
import type { RequestTrace } from "../../clients/kube-http.ts";

export type StepName = "function read" | "reconcile" | "effects" | "finalize" | "function write";

export interface Steps {
  /** Runs `work` as the step `name`; what it throws fails the step's span and is thrown on. */
  run<T>(name: StepName, work: () => Promise<T>, attributes?: Attributes): Promise<T>;
  /** The same for work that returns at once (the user's pure reconcile). */
  runNow<T>(name: StepName, work: () => T): T;
  /** Which attempt of the reconcile the requests from now on belong to (after a 409: the next). */
  attempt(n: number): void;
}

const untraced: Steps = { run: (_, work) => work(), runNow: (_, work) => work(), attempt: () => {} };

/** The step `name` of the handling `ctx` is (untraced without steps). */
export const step = <T>(ctx: { steps?: Steps }, name: StepName, work: () => Promise<T>, attributes?: Attributes): Promise<T> =>
  (ctx.steps ?? untraced).run(name, work, attributes);

export const stepNow = <T>(ctx: { steps?: Steps }, name: StepName, work: () => T): T => (ctx.steps ?? untraced).runNow(name, work);

/** The steps under `handle` (the context of the "function handle" span), and where a request made now belongs. */
export function tracedSteps(tracer: Tracer, handle: Context): { steps: Steps; current: () => RequestTrace } {
  let parent = handle;
  let attempt = 1;
  const failed = (span: Span, error: unknown): void => {
    span.setStatus({ code: SpanStatusCode.ERROR, message: error instanceof Error ? error.message : String(error) });
  };
  const open = (name: StepName, attributes?: Attributes) => {
    const span = tracer.startSpan(name, { attributes: { ...attributes, "crdfn.attempt": attempt } }, parent);
    const outer = parent;
    parent = trace.setSpan(outer, span);
    return {
      span,
      close: () => {
        parent = outer;
        span.end();
      },
    };
  };
  return {
    steps: {
      async run(name, work, attributes) {
        const { span, close } = open(name, attributes);
        try {
          return await work();
        } catch (error) {
          failed(span, error);
          throw error;
        } finally {
          close();
        }
      },
      runNow(name, work) {
        const { span, close } = open(name);
        try {
          return work();
        } catch (error) {
          failed(span, error);
          throw error;
        } finally {
          close();
        }
      },
      attempt: (n) => {
        attempt = n;
      },
    },
    current: () => ({ parent, attempt }),
  };
}
