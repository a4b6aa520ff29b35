// A starting server is waited for as long as it makes progress (its CPU time or its log), however
// long that takes, and given up once it makes none: stand-in servers (node -e) with a short
// stall bound. Real servers are started by every integration test.
import { after, describe, it } from "node:test";
import assert from "node:assert/strict";
import { existsSync } from "node:fs";
import { join } from "node:path";
import { startScratch } from "./reaper.ts";
import { startServer } from "./process.ts";
import { SetupError } from "./errors.ts";

const scratch = startScratch("crdfn-process-test");
after(() => scratch.remove());

/** The stall bound of these tests: each stand-in stays unready for several of them. */
const STALL_MS = 2000;

/** A stand-in server running `script`; ready once it has written the file `ready` in its folder. */
function start(name: string, script: string) {
  const marker = join(scratch.dir, `${name}.ready`);
  return startServer(
    {
      name,
      command: process.execPath,
      args: ["-e", `const marker = ${JSON.stringify(marker)}; console.log("pid " + process.pid); ${script}`],
      logFile: join(scratch.dir, `${name}.log`),
      stallMs: STALL_MS,
      ready: () => Promise.resolve(existsSync(marker)),
    },
    scratch.reaper,
  );
}

const becomeReady = `require("node:fs").writeFileSync(marker, ""); setInterval(() => {}, 1e6);`;
const alive = (pid: number) => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

describe("startServer waits on progress, not on a clock", () => {
  it("waits for a server busy on CPU, writing nothing, for three stall bounds", async (t) => {
    if (process.platform !== "linux") return t.skip("CPU time is read from /proc");
    const server = await start("busy", `const until = Date.now() + ${3 * STALL_MS}; while (Date.now() < until) {} ${becomeReady}`);
    await server.stop(0);
  });

  it("waits for a server that only writes to its log, for three stall bounds", async () => {
    const server = await start(
      "logging",
      `const until = Date.now() + ${3 * STALL_MS}; const t = setInterval(() => { console.log("starting…"); if (Date.now() > until) { clearInterval(t); ${becomeReady} } }, 100);`,
    );
    await server.stop(0);
  });

  it("gives up a server that makes no progress, stops it, and shows its log", async () => {
    const error = await start("stuck", `setInterval(() => {}, 1e6);`).then(
      () => assert.fail("a stuck server was taken for ready"),
      (e: unknown) => e,
    );
    assert.ok(error instanceof SetupError);
    assert.match(error.message, /^stuck made no progress for 2s while starting .*; last lines of .*stuck\.log:\npid (\d+)$/);
    const pid = Number(/pid (\d+)$/.exec(error.message)![1]);
    assert.equal(alive(pid), false, "the stuck server was stopped");
  });

  it("reports a server that exits while starting, with its log", async () => {
    const error = await start("exits", `console.log("no config"); process.exit(3);`).then(
      () => assert.fail("an exited server was taken for ready"),
      (e: unknown) => e,
    );
    assert.ok(error instanceof SetupError);
    assert.match(error.message, /^exits exited \(3\) while starting; last lines of .*exits\.log:\npid \d+\nno config$/);
  });
});
