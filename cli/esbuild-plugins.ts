// esbuild plugins for crdfn's bundles: the bridge's image (cli/bundle.ts: kubeConfigOnly) and the
// functions' Lambda bundle (serverless.yml: custom.esbuild.plugins names this file; serverless-
// esbuild loads its default export, clientNodeLeftOut).
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import type { Plugin } from "esbuild";

/**
 * crdfn uses only client-node's KubeConfig (clients/kube-http.ts makes the requests), yet its
 * index loads every generated API client: take KubeConfig from its own module and leave the
 * generated clients out (KubeConfig reaches them only through makeApiClient, which crdfn never
 * calls; a call throws naming this): the generated clients are most of what a bundle loads at
 * start (what it saves: docs/performance.md, "What the bundles leave out").
 */
export const kubeConfigOnly: Plugin = {
  name: "crdfn-client-node-kubeconfig-only",
  setup(b) {
    const dist = dirname(createRequire(import.meta.url).resolve("@kubernetes/client-node"));
    const config = join(dist, "config.js");
    b.onResolve({ filter: /^@kubernetes\/client-node$/ }, () => ({ path: config }));
    b.onResolve({ filter: /^\.\/gen\/index\.js$/ }, (a) =>
      a.importer === config ? { path: "client-node-generated-clients", namespace: "crdfn-left-out" } : undefined,
    );
    b.onLoad({ filter: /.*/, namespace: "crdfn-left-out" }, () => ({
      contents:
        "const out = () => { throw new Error(\"client-node's generated API clients are left out of crdfn's bundles (cli/esbuild-plugins.ts)\"); }; export const createConfiguration = out; export class ServerConfiguration { constructor() { out(); } }",
      loader: "js",
    }));
  },
};

/**
 * The Lambda bundle's functions reach their clusters with eks or token entries, which need no
 * client-node (clients/kube-connection.ts): leave it out whole, for a cold start that loads less
 * (`npm run bench:cold`; docs/performance.md, "What the bundles leave out"). A kubeconfig entry
 * in a Lambda's registry fails on its first event, naming this.
 */
export const clientNodeLeftOut: Plugin = {
  name: "crdfn-client-node-left-out",
  setup(b) {
    b.onResolve({ filter: /^@kubernetes\/client-node$/ }, () => ({ path: "client-node", namespace: "crdfn-left-out" }));
    b.onLoad({ filter: /.*/, namespace: "crdfn-left-out" }, () => ({
      contents:
        'export class KubeConfig { constructor() { throw new Error("a kubeconfig cluster entry cannot be used in crdfn\'s Lambda bundle, which leaves client-node out for its cold start (cli/esbuild-plugins.ts): use auth eks or token"); } }',
      loader: "js",
    }));
  },
};

/** What serverless-esbuild loads for the Lambda bundle (serverless.yml: custom.esbuild.plugins). */
export default [clientNodeLeftOut];
