#!/usr/bin/env node
// The `crdfn` command. Installed from npm, it runs the built CLI (dist/) on this Node, which must
// be 22.18 or newer (the first Node 22 that runs a project's TypeScript files as they are): on an
// older one it says so in one line before loading anything that needs a newer Node. In a checkout
// of crdfn itself (sources beside this file, no dist/ needed), it first makes sure the locked
// dependencies, which bring Node 24, are installed, then runs the TypeScript CLI on that Node.
// Plain JavaScript that any Node parses; nothing but Node's built-ins is imported up front.
import { existsSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

/** The one Node minimum crdfn states (package.json engines, README, the projects crdfn init makes). */
const NODE_MINIMUM = [22, 18];

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const sources = join(root, "cli", "main.ts");

function nodeIsTooOld(version = process.versions.node) {
  const [major, minor] = version.split(".").map(Number);
  return major < NODE_MINIMUM[0] || (major === NODE_MINIMUM[0] && minor < NODE_MINIMUM[1]);
}

if (!existsSync(sources)) {
  if (nodeIsTooOld()) {
    console.error(`crdfn: needs Node.js ${NODE_MINIMUM.join(".")} or newer; this is ${process.version} (${process.execPath})`);
    process.exit(1);
  }
  await import(pathToFileURL(join(root, "dist", "cli", "main.js")).href);
} else {
  const { spawn } = await import("node:child_process");
  const { ensureInstalled } = await import("./bootstrap.mjs");
  ensureInstalled();
  const node24 = join(root, "node_modules", "node", "bin", "node");
  const child = spawn(node24, ["--conditions=crdfn-source", sources, ...process.argv.slice(2)], { stdio: "inherit" });
  // Ctrl-C reaches the whole foreground process group; the CLI handles it. Forward SIGTERM.
  for (const sig of ["SIGTERM", "SIGHUP"]) process.on(sig, () => child.kill(sig));
  process.on("SIGINT", () => {});
  child.on("exit", (code, signal) => process.exit(code ?? (signal ? 128 : 1)));
}
