// esbuild, in one place: the bridge's image bundle (and the Pub/Sub library beside it), and
// loading a user's operator written in TypeScript on any supported Node (22 or 24) without a
// loader installed by the user.
import { randomBytes } from "node:crypto";
import { existsSync, rmSync, writeFileSync } from "node:fs";
import { basename, dirname, join, resolve } from "node:path";
import { pathToFileURL } from "node:url";
import { build, type Plugin } from "esbuild";
import { packageRoot } from "../emulator/paths.ts";
import { kubeConfigOnly } from "./esbuild-plugins.ts";

/**
 * The first line of every ES module bundle crdfn makes (the bridge's, the Cloud Run upload, and the
 * Lambda's through serverless.yml): some bundled CommonJS dependencies call require(), which an ES
 * module does not have.
 */
export const ESM_REQUIRE_BANNER = "import { createRequire } from 'node:module'; const require = createRequire(import.meta.url);";

/** The file beside the bridge's bundle that holds the Pub/Sub client library. */
export const BRIDGE_PUBSUB_FILE = "bridge-pubsub.mjs";

/**
 * The bridge as one ES module (its image, and the benchmark's bridge process), and beside it the
 * Pub/Sub client library as a module of its own, which a bridge on Pub/Sub imports on its first
 * publish (bridge/pubsub-transport.ts). Inside the bridge's bundle it would weigh on every bridge,
 * on SQS too (docs/performance.md, "What the bundles leave out").
 */
export async function bundleBridge(outfile: string): Promise<void> {
  const source = join(packageRoot, "bridge", "main.ts");
  const built = join(packageRoot, "dist", "bridge", "main.js");
  const common = {
    bundle: true,
    platform: "node",
    format: "esm",
    target: "node22",
    logLevel: "warning",
    // Minified: the source is held in memory once loaded, so a smaller bundle is a smaller bridge.
    minify: true,
    banner: { js: ESM_REQUIRE_BANNER },
  } as const;
  const pubsubBeside: Plugin = {
    name: "crdfn-pubsub-beside",
    setup(b) {
      b.onResolve({ filter: /^@google-cloud\/pubsub$/ }, (args) =>
        args.kind === "dynamic-import" ? { path: `./${BRIDGE_PUBSUB_FILE}`, external: true } : undefined,
      );
    },
  };
  await build({
    ...common,
    // From sources in a checkout; from the built JavaScript when installed.
    entryPoints: [existsSync(source) ? source : built],
    outfile,
    plugins: [kubeConfigOnly, pubsubBeside],
  });
  await build({
    ...common,
    stdin: { contents: 'export { PubSub } from "@google-cloud/pubsub";', resolveDir: packageRoot, loader: "js" },
    outfile: join(dirname(outfile), BRIDGE_PUBSUB_FILE),
    // gRPC's and google-gax's CommonJS compute paths from __dirname when they load (used only to
    // load .proto files from disk, which the Pub/Sub client does not: its protos are bundled JSON).
    banner: {
      js: `${ESM_REQUIRE_BANNER} import { fileURLToPath as __crdfnPath } from 'node:url'; const __filename = __crdfnPath(import.meta.url); const __dirname = __crdfnPath(new URL('.', import.meta.url));`,
    },
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
