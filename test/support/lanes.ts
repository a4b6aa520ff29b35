// Leases on the shared control planes ("lanes", see shared-servers.ts): each is served to one test
// file at a time. A lease is a folder holding its owner's pid, made by an atomic rename, so two
// processes never both get one; a lease whose owner died (SIGKILL, a crash) is taken over.
// A file that must run alone takes every lane, in order; while it waits, no one else takes one.
import { mkdirSync, readFileSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";

const POLL_MS = 250;

export interface Lease {
  /** The lanes held: one, or all of them for a file that runs alone. */
  lanes: number[];
  release(): void;
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === "EPERM";
  }
}

function ownerOf(path: string): number | undefined {
  try {
    return Number(readFileSync(join(path, "pid"), "utf8"));
  } catch {
    return undefined;
  }
}

/** Removes the lease or marker at `path` when its owner is dead; true when it is free now. */
function freeIfStale(path: string): boolean {
  const owner = ownerOf(path);
  if (owner === undefined) return true;
  if (owner !== process.pid && alive(owner)) return false;
  rmSync(path, { recursive: true, force: true });
  return true;
}

function tryTake(path: string): boolean {
  const staging = `${path}.${process.pid}`;
  mkdirSync(staging, { recursive: true });
  writeFileSync(join(staging, "pid"), String(process.pid));
  try {
    // Fails when another process's lease folder (never empty) is already there.
    renameSync(staging, path);
    return true;
  } catch {
    rmSync(staging, { recursive: true, force: true });
    return false;
  }
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

export async function leaseLane(lockDir: string, count: number, o: { alone?: boolean; onWait?: (why: string) => void } = {}): Promise<Lease> {
  const lane = (i: number) => join(lockDir, `lane-${i}`);
  const waiting = join(lockDir, "alone-waiting");
  const held: number[] = [];
  const release = () => {
    for (const i of held.splice(0)) if (ownerOf(lane(i)) === process.pid) rmSync(lane(i), { recursive: true, force: true });
    if (ownerOf(waiting) === process.pid) rmSync(waiting, { recursive: true, force: true });
  };
  // A test process that ends without its after() hooks still frees what it holds.
  process.once("exit", release);
  let said = false;
  const wait = async (why: string) => {
    if (!said) o.onWait?.(why);
    said = true;
    await sleep(POLL_MS);
  };

  if (o.alone) {
    // Announce first, so that files arriving now wait behind this one instead of overtaking it.
    while (!tryTake(waiting)) if (!freeIfStale(waiting)) await wait("another file that runs alone");
    for (let i = 0; i < count; i++) {
      while (!tryTake(lane(i))) if (!freeIfStale(lane(i))) await wait(`lane ${i}`);
      held.push(i);
    }
    rmSync(waiting, { recursive: true, force: true });
    return { lanes: [...held], release };
  }
  for (;;) {
    if (freeIfStale(waiting)) {
      for (let i = 0; i < count; i++) {
        if (tryTake(lane(i)) || (freeIfStale(lane(i)) && tryTake(lane(i)))) {
          held.push(i);
          return { lanes: [...held], release };
        }
      }
    }
    await wait("a free lane");
  }
}
