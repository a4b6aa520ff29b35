// Bundles the bridge into one ES module for its image: the same sources the tests run, with
// types stripped ahead of time. Running .ts directly costs ~65 MiB of RSS for the type
// stripper alone, and loading one file is faster than resolving node_modules.
//   node bridge/bundle.ts dist/bridge.mjs
import { build } from "esbuild";

export async function bundleBridge(outfile: string): Promise<void> {
  await build({
    entryPoints: [new URL("./main.ts", import.meta.url).pathname],
    outfile,
    bundle: true,
    platform: "node",
    format: "esm",
    target: "node24",
    logLevel: "warning",
    // Some dependencies are CommonJS and call require(); give the ES module one.
    banner: { js: "import { createRequire } from 'node:module'; const require = createRequire(import.meta.url);" },
  });
}

if (import.meta.main) await bundleBridge(process.argv[2] ?? "dist/bridge.mjs");
