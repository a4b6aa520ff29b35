// A stand-in runtime for adapter tests of pure settlement logic: every message is received as it
// is (its body's `cluster`, when it is JSON, names its circuit; nothing is verified) and answered
// by `answer`, which sees the message.
import type { KeyEvent } from "../../core/event.ts";
import { DEFERRALS_ATTRIBUTE, DEFERRED_SINCE_ATTRIBUTE, type Delivery, type QueueMessage } from "../../functions/runtime/delivery.ts";
import type { Outcome } from "../../functions/runtime/outcome.ts";
import type { HandledOutcome, Runtime } from "../../functions/runtime/runtime.ts";

const clusterOf = (body: string): string => {
  try {
    const { cluster } = JSON.parse(body) as { cluster?: unknown };
    return typeof cluster === "string" ? cluster : "";
  } catch {
    return "";
  }
};

export function fakeRuntime(
  answer: (message: QueueMessage) => Promise<Outcome & { apiCalls?: number }> | (Outcome & { apiCalls?: number }),
  flushMetrics?: () => void,
): Runtime {
  return {
    served: { keysOf: () => new Map(), resources: [] },
    receive: (message): Delivery => ({
      ok: true,
      message,
      event: { cluster: clusterOf(message.body) } as KeyEvent,
      firstDelivery: true,
      deferralAttributes: (since, deferrals) => ({ [DEFERRED_SINCE_ATTRIBUTE]: String(since), [DEFERRALS_ATTRIBUTE]: String(deferrals) }),
    }),
    handle: async (delivery): Promise<HandledOutcome> => ({ apiCalls: 1, ...(await answer(delivery.message)) }),
    ...(flushMetrics ? { flushMetrics } : {}),
  };
}
