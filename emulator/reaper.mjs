// Guarantees that servers started for a test or `crdfn cluster up` die with their owner,
// even when the owner is SIGKILLed and never runs its own cleanup. The owner writes
// "pid <n>" (a process-group leader) and "dir <path>" lines to our stdin; when stdin
// closes, for whatever reason, we end those groups and remove those folders.
// Plain JavaScript so it runs on any Node without a build step.
import { rmSync } from "node:fs";

const pids = new Set();
const dirs = new Set();
let buffered = "";

process.stdin.setEncoding("utf8");
process.stdin.on("data", (chunk) => {
  buffered += chunk;
  const lines = buffered.split("\n");
  buffered = lines.pop() ?? "";
  for (const line of lines) {
    const [verb, ...rest] = line.split(" ");
    const arg = rest.join(" ");
    if (verb === "pid") pids.add(Number(arg));
    else if (verb === "forget") pids.delete(Number(arg));
    else if (verb === "dir") dirs.add(arg);
  }
});
process.stdin.on("end", reap);
process.stdin.on("error", reap);
// The owner's process group may be signalled as a whole (Ctrl-C): outlive it to clean up.
for (const sig of ["SIGINT", "SIGTERM", "SIGHUP"]) process.on(sig, () => {});

function alive(pid) {
  try {
    process.kill(-pid, 0);
    return true;
  } catch {
    return false;
  }
}

function signal(pid, sig) {
  try {
    process.kill(-pid, sig);
  } catch {
    // already gone
  }
}

async function reap() {
  for (const pid of pids) signal(pid, "SIGTERM");
  const deadline = Date.now() + 5000;
  while ([...pids].some(alive) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 100));
  for (const pid of pids) if (alive(pid)) signal(pid, "SIGKILL");
  await new Promise((r) => setTimeout(r, 200));
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true, maxRetries: 3 });
  process.exit(0);
}
