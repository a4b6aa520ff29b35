// `npm run bench:trackermem`: what the bridge's index holds per object, in its own heap, with no
// API server: N Greetings, each with the ConfigMap its function applied, fed to the trackers as a
// starting bridge's first lists feed them (bridge/config.ts defaults: bodies, first-list bodies,
// the start window), as they look on the wire (managedFields, the applied hash, the fence, the
// status's reconciled record). Two starts: every object settled (the steady state), and none
// reconciled yet (a cold start: all of them wait in the start window's line). Retained heap after
// a full collection, per parent and per child, and what the line adds. Run with --expose-gc (the
// npm script does). The bundled bridge runs with a 128 MiB old space (deploy/bridge.ts).
import { spawnSync } from "node:child_process";
import { randomUUID } from "node:crypto";
import { Command, InvalidArgumentError } from "commander";
import { ChildTracker } from "../bridge/child-tracker.ts";
import { loadBridgeConfig } from "../bridge/config.ts";
import { systemTimers } from "../bridge/due-schedule.ts";
import { KeptBodies } from "../bridge/kept-bodies.ts";
import { ParentTracker } from "../bridge/parent-tracker.ts";
import { StartWindow } from "../bridge/start-window.ts";
import type { TrackerOptions } from "../bridge/tracker.ts";
import type { WatchedObject } from "../bridge/watched-object.ts";
import { digest } from "../core/object-fingerprint.ts";
import { childMarkOf, reconciledRecord } from "../core/reconciled.ts";
import { runBench } from "./command-line.ts";

const NAMESPACE = "cold-crdfn-100000";
const greetings = { group: "example.com", version: "v1", plural: "greetings", kind: "Greeting", namespaced: true };
const configMaps = { group: "", version: "v1", plural: "configmaps", kind: "ConfigMap", namespaced: true };

const gc = (globalThis as { gc?: () => void }).gc;
const heap = (): number => {
  gc?.();
  gc?.();
  return process.memoryUsage().heapUsed;
};
const mib = (bytes: number): string => (bytes / 2 ** 20).toFixed(1);
/**
 * What a start measures is held here until it is done: V8 collects what a function no longer
 * uses, so a tracker used only before a measurement would be counted as nothing.
 */
const held: unknown[] = [];

const STATUS_WRITTEN = "2026-11-25T16:15:46Z";

/** A Greeting as a watch delivers it; `statusWritten`: with its function's status write in managedFields. */
function greeting(i: number, uid: string, statusWritten: boolean): WatchedObject {
  const name = `bench-${String(i).padStart(5, "0")}`;
  return {
    apiVersion: "example.com/v1",
    kind: "Greeting",
    metadata: {
      name,
      namespace: NAMESPACE,
      uid,
      resourceVersion: String(100_000 + 2 * i),
      generation: 1,
      creationTimestamp: "2026-11-25T15:56:39Z",
      managedFields: [
        {
          manager: "bench",
          operation: "Update",
          apiVersion: "example.com/v1",
          time: "2026-11-25T15:56:39Z",
          fieldsType: "FieldsV1",
          fieldsV1: { "f:spec": {} },
        },
        ...(statusWritten
          ? [{ manager: "crdfn", operation: "Update", subresource: "status", apiVersion: "example.com/v1", time: STATUS_WRITTEN, fieldsType: "FieldsV1" }]
          : []),
      ],
    },
    spec: { message: `hello ${i}` },
  };
}

/** The Greeting as its function left it: Ready, with the record of `applied`. */
function reconciledGreeting(i: number, uid: string, applied: WatchedObject): WatchedObject {
  const g = greeting(i, uid, true);
  return {
    ...g,
    status: {
      conditions: [{ type: "Ready", status: "True", reason: "Reconciled", message: "", observedGeneration: 1, lastTransitionTime: STATUS_WRITTEN }],
      observedGeneration: 1,
      phase: "Ready",
      reconciled: reconciledRecord(g, [childMarkOf(applied, "crdfn")]),
    },
  };
}

/** The ConfigMap the function applied for Greeting i. */
function child(i: number, parentUid: string): WatchedObject {
  const parent = `bench-${String(i).padStart(5, "0")}`;
  return {
    apiVersion: "v1",
    kind: "ConfigMap",
    metadata: {
      name: `${parent}-greeting`,
      namespace: NAMESPACE,
      // Its own uid, the same each time it is made: the parent's record names it.
      uid: `c${parentUid.slice(1)}`,
      resourceVersion: String(100_001 + 2 * i),
      creationTimestamp: "2026-11-25T15:58:29Z",
      annotations: { "crdfn.io/applied-hash": digest(i).repeat(2), "crdfn.io/parent-generation": "1" },
      labels: { "crdfn.io/parent-uid": parentUid, "example.com/greeting": parent },
      ownerReferences: [{ apiVersion: "example.com/v1", kind: "Greeting", name: parent, uid: parentUid, controller: true, blockOwnerDeletion: true }],
      managedFields: [
        { manager: "crdfn", operation: "Apply", apiVersion: "v1", time: "2026-11-25T15:58:29Z", fieldsType: "FieldsV1", fieldsV1: { "f:data": {} } },
      ],
    },
    data: { message: `hello ${i}` },
  };
}

/** The object as a list's page delivers it: parsed from JSON, every string flat. */
const wire = (obj: WatchedObject): WatchedObject => JSON.parse(JSON.stringify(obj)) as WatchedObject;

interface Measured {
  perParent: number;
  perChild: number;
  line: number;
  total: number;
  announced: number;
  waiting: number;
  /** Bytes of the listed bodies kept for the first announcements, outside the heap, once listed. */
  kept: number;
}

/** One start of N objects: the first lists, then their work released, measured after each. */
async function measure(objects: number, settled: boolean): Promise<Measured> {
  const config = loadBridgeConfig({
    CRDFN_CLUSTER: "bench",
    CRDFN_QUEUE_URL: "http://127.0.0.1:1/000000000000/bench.fifo",
    CRDFN_RESOURCES: "example.com/v1/greetings>v1/configmaps",
    AWS_REGION: "us-east-1",
  });
  const timers = systemTimers();
  let announced = 0;
  const window = new StartWindow({ size: config.startWindow, timeoutMs: 3_600_000, timers });
  const options: TrackerOptions = {
    cluster: config.cluster,
    skipStatusOnly: config.skipStatusOnly,
    now: () => new Date(),
    timers,
    functionFieldManager: config.functionFieldManager,
    announce: () => Promise.resolve(void announced++),
  };
  // Flat, as JSON.parse makes them: randomUUID builds a chain of pieces, which the trackers'
  // hashing would flatten and free mid-measurement.
  const uids = Array.from({ length: objects }, () => JSON.parse(`"${randomUUID()}"`) as string);
  const kept = new KeptBodies(config.maxInitialBodyBytes);
  const base = heap();
  const parents = new ParentTracker(greetings, options, {
    bodies: config.bodies,
    maxBodyBytes: config.maxBodyBytes,
    initialBodies: kept,
    startWindow: window,
  });
  const children = new ChildTracker(configMaps, false, options);
  parents.owns(children);
  held.push(parents, children, window, uids);
  const parentsEpoch = parents.beginList();
  for (let i = 0; i < objects; i++) {
    const uid = uids[i] ?? "";
    await parents.upsert(wire(settled ? reconciledGreeting(i, uid, child(i, uid)) : greeting(i, uid, false)), "list", parentsEpoch);
  }
  const afterParents = heap();
  const keptBytes = kept.bytes;
  const childrenEpoch = children.beginList();
  for (let i = 0; i < objects; i++) await children.upsert(wire(child(i, uids[i] ?? "")), "list", childrenEpoch);
  const afterChildren = heap();
  await parents.releaseInitialWork();
  await new Promise((r) => setTimeout(r, 200));
  const afterRelease = heap();
  const waiting = window.waiting;
  window.stop();
  parents.stop();
  held.length = 0;
  return {
    perParent: (afterParents - base) / objects,
    perChild: (afterChildren - afterParents) / objects,
    line: afterRelease - afterChildren,
    total: afterRelease - base,
    announced,
    waiting,
    kept: keptBytes,
  };
}

const command = new Command("npm run bench:trackermem --")
  .description("the bridge's index in its own heap, per parent and per child, settled and at a cold start (no API server)")
  .option(
    "--objects <n>",
    "Greetings, each with one ConfigMap",
    (t) => {
      const n = Number(t);
      if (!Number.isInteger(n) || n < 1) throw new InvalidArgumentError("--objects must be a whole number ≥ 1");
      return n;
    },
    100_000,
  )
  .option("--case <case>", "one start only, in this process, printed as JSON (settled or cold): how the bench runs each")
  .addHelpText("after", "\nExample:\n  npm run bench:trackermem -- --objects 100000")
  .action(async (o: { objects: number; case?: string }) => {
    if (gc === undefined) throw new Error("run with --expose-gc (npm run bench:trackermem does)");
    if (o.case !== undefined) {
      // A first small start, not reported: what loading and compiling leaves in the heap, which a
      // later collection frees, would otherwise be counted against the start measured.
      await measure(Math.min(o.objects, 2000), o.case === "settled");
      console.log(JSON.stringify(await measure(o.objects, o.case === "settled")));
      return;
    }
    console.log(
      `${o.objects} Greetings, one ConfigMap each; retained heap after a full collection (Node ${process.version}), each start in a process of its own`,
    );
    console.log(
      "| start | per parent (B) | per child (B) | start line (MiB) | index in all (MiB) | announced / waiting | listed bodies kept outside the heap (MiB) |",
    );
    console.log("|---|---|---|---|---|---|---|");
    for (const settled of [true, false]) {
      const child = spawnSync(
        process.execPath,
        [...process.execArgv, process.argv[1] ?? "", "--objects", String(o.objects), "--case", settled ? "settled" : "cold"],
        {
          encoding: "utf8",
        },
      );
      if (child.status !== 0) throw new Error(`the ${settled ? "settled" : "cold"} start failed: ${child.stderr}`);
      const m = JSON.parse(child.stdout.trim().split("\n").at(-1) ?? "{}") as Measured;
      console.log(
        `| ${settled ? "all settled" : "cold: none reconciled"} | ${m.perParent.toFixed(0)} | ${m.perChild.toFixed(0)} | ${mib(m.line)} | ${mib(m.total)} | ${m.announced} / ${m.waiting} | ${mib(m.kept)} |`,
      );
    }
  });

if (import.meta.main) await runBench("bench:trackermem", command);
