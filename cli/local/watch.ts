// `crdfn dev --watch`: reload an operator when its module, or a file it imports, changes. The
// control plane, the queue and the bridge keep running; only the reconcile runtime is swapped.
// A module that no longer loads leaves the previous version running.
import { watch, type FSWatcher } from "node:fs";
import { dirname, join, relative } from "node:path";
import type { Operator } from "../../core/operator.ts";
import { checkDistinct, loadOperatorWithInputs } from "../operators.ts";
import type { Reloaded } from "./pipeline.ts";

export interface LoadedOperator {
  file: string;
  operator: Operator<unknown>;
  /** Absolute paths of the files it is built from. */
  inputs: string[];
}

export interface WatchOptions {
  loaded: LoadedOperator[];
  /** Runs the new set of operators (the pipeline's reload). */
  apply(operators: ReadonlyArray<Operator<unknown>>): Promise<Reloaded>;
  say(line: string): void;
  /** Quiet time after the last change before reloading (editors write in steps). Default 150 ms. */
  debounceMs?: number;
}

export interface OperatorWatch {
  close(): void;
}

const oneLine = (e: unknown) => (e instanceof Error ? e.message : String(e)).replace(/\s*\n\s*/g, " ");

export function watchOperators(o: WatchOptions): OperatorWatch {
  const loaded = [...o.loaded];
  const watchers = new Map<string, FSWatcher>();
  const timers = new Map<number, NodeJS.Timeout>();
  let queue = Promise.resolve();
  let closed = false;

  const reload = async (i: number): Promise<void> => {
    const old = loaded[i]!;
    const name = relative(process.cwd(), old.file) || old.file;
    let next: LoadedOperator;
    try {
      next = { file: old.file, ...(await loadOperatorWithInputs(old.file)) };
      checkDistinct(loaded.map((l, j) => (j === i ? next.operator : l.operator)));
    } catch (e) {
      o.say(`✖ ${name} not reloaded, the previous version keeps running: ${oneLine(e)}`);
      return;
    }
    try {
      const done = await o.apply(loaded.map((l, j) => (j === i ? next.operator : l.operator)));
      loaded[i] = next;
      for (const note of done.notes) o.say(`  ${note}`);
      o.say(
        `↻ ${next.operator.resource.kind} reloaded from ${name}${done.crdsApplied.length ? ` (CRD ${done.crdsApplied.join(", ")} re-applied)` : ""}; ${done.resynced} object(s) reconciled again`,
      );
      if (done.bridgeStale) o.say(`! ${next.operator.resource.kind}: its watched or owned kinds changed; restart crdfn dev so the bridge watches them`);
    } catch (e) {
      o.say(`✖ ${name} not reloaded, the previous version keeps running: ${oneLine(e)}`);
    }
    refresh();
  };

  const changed = (path: string) => {
    loaded.forEach((l, i) => {
      if (!l.inputs.includes(path)) return;
      clearTimeout(timers.get(i));
      timers.set(
        i,
        setTimeout(() => {
          timers.delete(i);
          // One reload at a time, in order, so two quick edits cannot race.
          queue = queue.then(() => (closed ? undefined : reload(i)));
        }, o.debounceMs ?? 150),
      );
    });
  };

  // Folders, not files: editors often save by writing a new file and renaming it over the old.
  const refresh = () => {
    const dirs = new Set(loaded.flatMap((l) => l.inputs.map((p) => dirname(p))));
    for (const [dir, w] of watchers) {
      if (!dirs.has(dir)) {
        w.close();
        watchers.delete(dir);
      }
    }
    for (const dir of dirs) {
      if (watchers.has(dir)) continue;
      const w = watch(dir, (_event, filename) => {
        if (filename) changed(join(dir, filename.toString()));
      });
      w.on("error", (e) => o.say(`! cannot watch ${dir}: ${oneLine(e)}`));
      watchers.set(dir, w);
    }
  };
  refresh();

  return {
    close() {
      closed = true;
      for (const t of timers.values()) clearTimeout(t);
      for (const w of watchers.values()) w.close();
    },
  };
}
