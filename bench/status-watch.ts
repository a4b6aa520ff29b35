// Watches the benchmark's Greetings and notes when each one's status reports a generation
// reconciled (Ready=True with observedGeneration): the "status observed" end of every sample.
import { Watch, type KubeConfig } from "@kubernetes/client-node";
import { EXAMPLE_GREETING, type GreetingKind } from "./greetings.ts";

interface Observation {
  generation: number;
  at: number;
}

interface Waiter {
  generation: number;
  resolve: (at: number | undefined) => void;
  timer: NodeJS.Timeout;
}

interface WatchedGreeting {
  metadata?: { name?: string; resourceVersion?: string };
  status?: { observedGeneration?: number; conditions?: { type: string; status: string; observedGeneration?: number }[] };
}

/** Observations kept per object: enough to find when a generation was first reported. */
const KEEP = 8;

export class StatusWatch {
  readonly #history = new Map<string, Observation[]>();
  readonly #waiters = new Map<string, Waiter[]>();
  readonly #kubeConfig: KubeConfig;
  readonly #path: string;
  readonly #now: () => number;
  #controller: AbortController | undefined;
  #resourceVersion: string | undefined;
  #stopped = false;
  /** Reconciled generations seen (one per status update that advanced observedGeneration). */
  advances = 0;

  constructor(kubeConfig: KubeConfig, namespace: string, now: () => number, kind: Omit<GreetingKind, "kind"> = EXAMPLE_GREETING) {
    this.#kubeConfig = kubeConfig;
    this.#path = `/apis/${kind.group}/${kind.version}/namespaces/${namespace}/${kind.plural}`;
    this.#now = now;
  }

  async start(): Promise<void> {
    const open = async (): Promise<void> => {
      this.#controller = await new Watch(this.#kubeConfig).watch(
        this.#path,
        { allowWatchBookmarks: true, ...(this.#resourceVersion ? { resourceVersion: this.#resourceVersion } : {}) },
        (type: string, obj: WatchedGreeting) => this.#onEvent(type, obj),
        () => {
          // A watch the server closed is re-opened where it left off; our own stop ends it.
          if (!this.#stopped) setTimeout(() => void open().catch(() => undefined), 100);
        },
      );
    };
    await open();
  }

  stop(): void {
    this.#stopped = true;
    this.#controller?.abort();
    for (const waiters of this.#waiters.values()) for (const w of waiters) this.#settle(w, undefined);
    this.#waiters.clear();
  }

  /** Highest generation reported reconciled for `name` (0 if none yet). */
  observed(name: string): number {
    return this.#history.get(name)?.at(-1)?.generation ?? 0;
  }

  /** Names with at least this generation reported reconciled. */
  countAtLeast(generation: number): number {
    let n = 0;
    for (const h of this.#history.values()) if ((h.at(-1)?.generation ?? 0) >= generation) n++;
    return n;
  }

  /**
   * When the status of `name` first reported `generation` (or a later one) as reconciled;
   * undefined if that does not happen within `timeoutMs`.
   */
  reconciled(name: string, generation: number, timeoutMs: number): Promise<number | undefined> {
    const seen = this.#history.get(name)?.find((o) => o.generation >= generation);
    if (seen) return Promise.resolve(seen.at);
    return new Promise((resolve) => {
      const waiter: Waiter = { generation, resolve, timer: setTimeout(() => this.#settle(waiter, undefined, name), timeoutMs) };
      this.#waiters.set(name, [...(this.#waiters.get(name) ?? []), waiter]);
    });
  }

  #settle(w: Waiter, at: number | undefined, name?: string): void {
    clearTimeout(w.timer);
    w.resolve(at);
    if (name !== undefined) {
      const rest = (this.#waiters.get(name) ?? []).filter((x) => x !== w);
      if (rest.length) this.#waiters.set(name, rest);
      else this.#waiters.delete(name);
    }
  }

  #onEvent(type: string, obj: WatchedGreeting): void {
    const at = this.#now();
    this.#resourceVersion = obj.metadata?.resourceVersion ?? this.#resourceVersion;
    const name = obj.metadata?.name;
    if (type === "BOOKMARK" || type === "DELETED" || name === undefined) return;
    const generation = obj.status?.observedGeneration ?? 0;
    const ready = obj.status?.conditions?.some((c) => c.type === "Ready" && c.status === "True");
    if (!ready || generation <= this.observed(name)) return;
    this.advances++;
    this.#history.set(name, [...(this.#history.get(name) ?? []), { generation, at }].slice(-KEEP));
    const waiters = this.#waiters.get(name);
    if (!waiters) return;
    const due = waiters.filter((w) => w.generation <= generation);
    const rest = waiters.filter((w) => w.generation > generation);
    if (rest.length) this.#waiters.set(name, rest);
    else this.#waiters.delete(name);
    for (const w of due) this.#settle(w, at);
  }
}
