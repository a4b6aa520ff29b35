// Problems a person must fix — the credential refused, a queue or topic that does not exist — as
// opposed to outages, which the bridge rides out. Each is said once when it starts and once when
// it ends, counted by kind in crdfn_bridge_problem, and listed by /readyz: the bridge is not
// ready while any is open.
import type { Logger } from "pino";
import type { BridgeMetrics } from "./metrics.ts";

/** The open problems, by key ("credential", "queue <url>", "topic <name>"): the kind is the key's first word. */
export class Problems {
  readonly #lines = new Map<string, string>();
  readonly #logger: Logger;
  readonly #metrics: BridgeMetrics;

  constructor(logger: Logger, metrics: BridgeMetrics) {
    this.#logger = logger;
    this.#metrics = metrics;
  }

  /** Opens a problem with the line that says it, or (undefined) closes it; saying the same again says nothing. */
  set(key: string, line: string | undefined): void {
    if (this.#lines.get(key) === line) return;
    if (line !== undefined) this.#logger.error({ problem: key }, line);
    else this.#logger.info({ problem: key }, "resolved");
    if (line === undefined) this.#lines.delete(key);
    else this.#lines.set(key, line);
    const kind = kindOf(key);
    this.#metrics.problem.set({ problem: kind }, [...this.#lines.keys()].filter((k) => kindOf(k) === kind).length);
  }

  has(key: string): boolean {
    return this.#lines.has(key);
  }

  /** The open problems' lines, for /readyz. */
  lines(): string[] {
    return [...this.#lines.values()];
  }

  get size(): number {
    return this.#lines.size;
  }
}

const kindOf = (key: string): string => key.split(" ")[0] ?? key;
