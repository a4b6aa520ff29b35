// One queue carries the events of every resource the bridge watches; a function process that
// serves several operators routes each event to the runtime of its resource.
import { parseKeyEvent } from "../../core/event.ts";
import type { Operator } from "../../core/operator.ts";
import type { Runtime } from "./runtime.ts";

export interface OperatorRuntime {
  operator: Operator<unknown>;
  runtime: Runtime;
}

export function dispatchByResource(served: readonly OperatorRuntime[]): Runtime {
  const [first] = served;
  if (!first) throw new Error("dispatchByResource needs at least one operator");
  if (served.length === 1) return first.runtime;
  const byResource = new Map(served.map((s) => [`${s.operator.resource.group}/${s.operator.resource.plural}`, s.runtime]));
  return {
    handle(message) {
      const parsed = parseKeyEvent(message.body);
      const runtime = parsed.ok ? byResource.get(`${parsed.event.group}/${parsed.event.plural}`) : undefined;
      // Malformed, or a resource nobody here serves: the first runtime logs it and dead-letters it.
      return (runtime ?? first.runtime).handle(message);
    },
  };
}
