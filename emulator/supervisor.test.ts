import { describe, it } from "node:test";
import assert from "node:assert/strict";
import type { RunningServer } from "./process.ts";
import { supervise } from "./supervisor.ts";

// The policy with stand-in processes and a fake clock; test/cli-dev.test.ts kills real servers.
describe("supervise", () => {
  const fakes = () => {
    let pid = 100;
    const all: Array<RunningServer & { crash(): void; stopped: boolean }> = [];
    const start = (): Promise<RunningServer> => {
      let end: (code: number | string) => void = () => undefined;
      const exited = new Promise<number | string>((r) => (end = r));
      const s = {
        name: "etcd",
        pid: ++pid,
        logFile: "/tmp/etcd.log",
        exited,
        stopped: false,
        signal: () => undefined,
        stop: () => ((s.stopped = true), end("SIGTERM"), exited.then(() => undefined)),
        crash: () => end("SIGKILL"),
      };
      all.push(s);
      return Promise.resolve(s);
    };
    return { all, start };
  };
  const tick = () => new Promise((r) => setImmediate(r));

  it("restarts a crashed server at once, then backs off a crash loop, and says so in one line each", async () => {
    const { all, start } = fakes();
    const lines: string[] = [];
    const waits: number[] = [];
    let t = 0;
    const s = supervise(await start(), start, { say: (l) => lines.push(l), now: () => t, wait: (ms) => (waits.push(ms), Promise.resolve()) });
    all[0]!.crash();
    await tick();
    await tick();
    assert.equal(all.length, 2);
    assert.equal(s.pid, all[1]!.pid, "the handle follows the running process");
    t += 5000;
    all[1]!.crash();
    await tick();
    await tick();
    t += 5000;
    all[2]!.crash();
    await tick();
    await tick();
    assert.deepEqual(waits, [1000, 2000]);
    assert.equal(lines.length, 3);
    assert.match(lines[0]!, /^etcd exited \(SIGKILL\); restarting it on the same ports and data; its log: \/tmp\/etcd\.log$/);
    assert.match(lines[2]!, /crash 3 in a row: in 2s/);
    // A healthy minute ends the loop: the next crash restarts at once again.
    t += 61_000;
    all[3]!.crash();
    await tick();
    await tick();
    assert.deepEqual(waits, [1000, 2000]);
    assert.equal(all.length, 5);
    await s.stop();
  });

  it("a stop asked for stops it for good", async () => {
    const { all, start } = fakes();
    const lines: string[] = [];
    const s = supervise(await start(), start, { say: (l) => lines.push(l) });
    await s.stop();
    await s.exited;
    await tick();
    assert.equal(all.length, 1);
    assert.equal(all[0]!.stopped, true);
    assert.deepEqual(lines, []);
  });
});
