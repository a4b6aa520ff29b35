// Child process for the lifecycle test: starts an environment, reports what it started,
// then waits to be killed.
import { readdirSync } from "node:fs";
import { startCluster } from "../../emulator/cluster.ts";

const c = await startCluster({ log: () => {} });
const dir = c.kubeconfigPath.replace(/\/kubeconfig$/, "");
process.stdout.write(JSON.stringify({ dir, files: readdirSync(dir).length }) + "\n");
setInterval(() => {}, 1 << 30);
