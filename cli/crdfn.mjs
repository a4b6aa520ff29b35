#!/usr/bin/env node
// The `crdfn` command: makes sure dependencies (and with them Node 24) are installed, then
// runs the TypeScript CLI on Node 24, whatever `node` started this launcher.
import { spawn } from "node:child_process";
import { join } from "node:path";
import { ensureInstalled, root } from "./bootstrap.mjs";

ensureInstalled();
const node24 = join(root, "node_modules", "node", "bin", "node");
const child = spawn(node24, [join(root, "cli", "main.ts"), ...process.argv.slice(2)], { stdio: "inherit" });
// Ctrl-C reaches the whole foreground process group; the CLI handles it. Forward SIGTERM.
for (const sig of ["SIGTERM", "SIGHUP"]) process.on(sig, () => child.kill(sig));
process.on("SIGINT", () => {});
child.on("exit", (code, signal) => process.exit(code ?? (signal ? 128 : 1)));
