#!/usr/bin/env node
// The `crdfn` command. Installed from npm, it runs the built CLI (dist/) on this Node (22 or
// 24). In a checkout of crdfn itself (sources beside this file, no dist/ needed), it first makes
// sure the locked dependencies, which bring Node 24, are installed, then runs the TypeScript
// CLI on that Node.
import { spawn } from "node:child_process";
import { existsSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const sources = join(root, "cli", "main.ts");

if (!existsSync(sources)) {
  await import(pathToFileURL(join(root, "dist", "cli", "main.js")).href);
} else {
  const { ensureInstalled } = await import("./bootstrap.mjs");
  ensureInstalled();
  const node24 = join(root, "node_modules", "node", "bin", "node");
  const child = spawn(node24, ["--conditions=crdfn-source", sources, ...process.argv.slice(2)], { stdio: "inherit" });
  // Ctrl-C reaches the whole foreground process group; the CLI handles it. Forward SIGTERM.
  for (const sig of ["SIGTERM", "SIGHUP"]) process.on(sig, () => child.kill(sig));
  process.on("SIGINT", () => {});
  child.on("exit", (code, signal) => process.exit(code ?? (signal ? 128 : 1)));
}
