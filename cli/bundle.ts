// esbuild, in one place: the bridge's image bundle, and loading a user's operator written in
// TypeScript on any supported Node (22 or 24) without a loader installed by the user.
import { randomBytes } from "node:crypto";
import { existsSync, rmSync, writeFileSync } from "node:fs";
import { basename, dirname, join, resolve } from "node:path";
import { pathToFileURL } from "node:url";
import { build } from "esbuild";
import { packageRoot } from "../emulator/paths.ts";
import { kubeConfigOnly } from "./esbuild-plugins.ts";

/** The bridge as one ES module (its image, and the benchmark's bridge process). */
export async function bundleBridge(outfile: string): Promise<void> {
  const source = join(packageRoot, "bridge", "main.ts");
  const built = join(packageRoot, "dist", "bridge", "main.js");
  await build({
    // From sources in a checkout; from the built JavaScript when installed.
    entryPoints: [existsSync(source) ? source : built],
    outfile,
    bundle: true,
    platform: "node",
    format: "esm",
    target: "node22",
    logLevel: "warning",
    // Minified source is held in memory once loaded: 5.3 → 2.0 MiB of bundle (npm run bench:bridge).
    minify: true,
    plugins: [kubeConfigOnly],
    // Some dependencies are CommonJS and call require(); give the ES module one.
    banner: { js: "import { createRequire } from 'node:module'; const require = createRequire(import.meta.url);" },
  });
}

/**
 * Imports a module written in TypeScript (or JavaScript): bundles its own files with esbuild,
 * leaving packages external so `crdfn` and `zod` resolve from the user's project exactly as
 * they would at run time. The bundle is written beside the source for that resolution and
 * removed right after it is imported. `inputs`: the absolute paths of the files bundled (what
 * `crdfn dev --watch` watches).
 */
export async function importBundled(file: string): Promise<{ module: unknown; inputs: string[] }> {
  const entry = resolve(file);
  const out = await build({
    metafile: true,
    entryPoints: [entry],
    bundle: true,
    packages: "external",
    platform: "node",
    format: "esm",
    target: "node22",
    sourcemap: "inline",
    write: false,
    logLevel: "silent",
  });
  const text = out.outputFiles[0]?.text ?? "";
  const tmp = join(dirname(entry), `.${basename(entry)}.${randomBytes(4).toString("hex")}.crdfn.mjs`);
  writeFileSync(tmp, text);
  const inputs = Object.keys(out.metafile.inputs).map((p) => resolve(p));
  try {
    return { module: await import(pathToFileURL(tmp).href), inputs };
  } finally {
    rmSync(tmp, { force: true });
  }
}
