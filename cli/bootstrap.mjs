// Makes a fresh clone runnable: installs the locked dependencies (which bring Node 24)
// when they are missing or older than the lock file. Plain JavaScript, because it runs on
// whatever Node the machine has before Node 24 is there. `npm start`, `npm test` and `npm pack`
// (its prepack, before the build needs tsc) run it first.
import { spawnSync } from "node:child_process";
import { existsSync, statSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

export const root = join(dirname(fileURLToPath(import.meta.url)), "..");

export function ensureInstalled() {
  const marker = join(root, "node_modules", ".package-lock.json");
  const lock = join(root, "package-lock.json");
  const node24 = join(root, "node_modules", "node", "bin", "node");
  const fresh = existsSync(marker) && existsSync(node24) && statSync(marker).mtimeMs >= statSync(lock).mtimeMs;
  if (fresh) return;
  console.error("crdfn: installing dependencies (npm ci; first run only)…");
  const npm = process.platform === "win32" ? "npm.cmd" : "npm";
  // Its output on stderr: under `npm pack --json` stdout is the pack's JSON, which a script reads.
  const r = spawnSync(npm, ["ci", "--no-audit", "--no-fund", "--loglevel=error"], { cwd: root, stdio: ["inherit", 2, "inherit"] });
  if (r.error || r.status !== 0) {
    console.error(`crdfn: npm ci failed (${r.error?.message ?? `exit ${r.status}`}); run it in ${root} to see why`);
    process.exit(1);
  }
}

if (process.argv[1] === fileURLToPath(import.meta.url)) ensureInstalled();
