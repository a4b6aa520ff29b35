// The architecture's layering, checked on every `npm test` (as kopf does with import-linter);
// test/layers.test.ts proves a forbidden import fails it.
//   core/      what an operator author imports, and the wire contract: pure, no client library, no I/O
//   deploy/    everything generated from an operator definition (CRDs, RBAC, admission policies,
//              the bridge's manifests, Serverless and GCP resources): pure; imports core only
//   clients/   the I/O clients both sides share (Kubernetes HTTP, SQS messages); imports core
//   bridge/    in-cluster watcher → queue; never imports functions/
//   functions/ reconcile runtime, FaaS adapters, crdfn/testing; never imports bridge/
//   emulator/  local control plane + queue for tests and `crdfn dev`; dev-only; imports core, clients
//   examples/  operators exactly as a user writes them: only crdfn's public entry points
//   cli/, test/, bench/ compose everything; inside cli/, three floors:
//     cli/*.ts        the plumbing every command shares (loading operators, esbuild, the .crdfn/env
//                     environment, signals, namespaces not served), below all of cli/
//     cli/local/      the local stack (pipeline, targets, identities, local Cloud Run, watch, state
//                     dir) that `crdfn dev`, bench/ and test/ run: imports no command
//     cli/admin/      the commands that act on a running deployment (status, dlq, resync, diff, replay)
//     cli/generate/   the commands that write files into a project (init, generate, crd, bundle)
//     cli/main.ts, program.ts, *-command.ts   the entry and the other commands, on top
// dependency-cruiser resolves packages to their files (node_modules/…), so package rules match
// resolved paths, and Node built-ins resolve to their bare names (fs, node:test).
const npm = ["npm", "npm-dev", "npm-peer", "npm-optional", "npm-no-pkg", "npm-unknown", "npm-bundled"];
const nodeIo = "^(node:)?(fs|net|http|https|http2|child_process|dgram|dns|tls|cluster|worker_threads|os|process)(/|$)";
const publicEntries = "^(core/index\\.ts|functions/adapters/(lambda|http)\\.ts|functions/testing/index\\.ts)$";
const framework = "^(core|deploy|clients|bridge|functions|emulator|cli|bench|test)/";
const notTest = "\\.test\\.ts$";
/** cli/'s top floor: the entry, the command tree and the commands outside admin/ and generate/. */
const cliTop = "^cli/(main|program|[^/]+-command)\\.ts$";
const cliFolders = ["local", "admin", "generate"];
/**
 * Nothing under `from` imports anything under `to` (paths as regular expressions). `tests`: false
 * leaves the tests under `from` free to (they may compose what production may not).
 */
const forbid = (name, from, to, comment, { tests = true } = {}) => ({
  name,
  ...(comment === undefined ? {} : { comment }),
  severity: "error",
  from: tests ? { path: from } : { path: from, pathNot: notTest },
  to: { path: to },
});
/** A folder of cli/'s middle floor imports neither a command nor the other two folders. */
const cliFolder = (name, folder, comment) => ({
  name,
  comment,
  severity: "error",
  from: { path: `^cli/${folder}/`, pathNot: notTest },
  to: { path: [`^cli/(${cliFolders.filter((f) => f !== folder).join("|")})/`, cliTop] },
});

module.exports = {
  forbidden: [
    {
      name: "pure-layers-import-only-zod-and-yaml",
      comment: "core/ (what an operator author imports, the wire contract) and deploy/ (what is generated from an operator definition) are pure: of packages only zod and yaml.",
      severity: "error",
      from: { path: "^(core|deploy)/", pathNot: notTest },
      to: { dependencyTypes: npm, pathNot: "(^|/)node_modules/(zod|yaml)/", dependencyTypesNot: ["type-only"] },
    },
    {
      name: "pure-layers-do-no-io",
      comment: "…and no I/O: deploy/ returns files' contents, the CLI writes them.",
      severity: "error",
      from: { path: "^(core|deploy)/", pathNot: notTest },
      to: { path: nodeIo, dependencyTypesNot: ["type-only"] },
    },
    forbid("core-imports-no-layer", "^core/", "^(deploy|clients|bridge|functions|emulator|cli|examples|test|bench)/"),
    forbid("deploy-imports-core-only", "^deploy/", "^(clients|bridge|functions|emulator|cli|examples|test|bench)/", "What is generated follows from the operator definition alone, never from how the bridge or the functions happen to work."),
    forbid("production-not-deploy", "^(clients|bridge|functions)/", "^deploy/", "The bridge and the functions run from their settings and the event contract; what generates their deploy files ships only with the CLI."),
    forbid("clients-are-shared", "^clients/", "^(bridge|functions|emulator|cli|examples|test|bench)/", "clients/ serves both sides, so it depends on neither."),
    forbid("bridge-not-functions", "^bridge/", "^functions/", "The bridge and the functions meet only through the event contract in core/."),
    forbid("functions-not-bridge", "^functions/", "^bridge/"),
    forbid("production-not-dev-tooling", "^(clients|bridge|functions)/", "^(emulator|cli|examples|test|bench)/", "What ships (bridge, functions) must not depend on the emulator, the CLI, examples or tests.", { tests: false }),
    forbid("emulator-is-infrastructure-only", "^emulator/", "^(deploy|bridge|functions|cli|examples|test|bench)/", "The local servers know nothing of the bridge, the functions or what is generated; they share only core's one-line errors and clients/' queue clients."),
    {
      name: "examples-use-the-public-api",
      comment: "An example is a user's operator: it imports crdfn's public entry points, nothing else of crdfn.",
      severity: "error",
      from: { path: "^examples/", pathNot: notTest },
      to: { path: framework, pathNot: publicEntries },
    },
    {
      name: "examples-import-by-package-name",
      comment: "…and by the package name (`crdfn`, `crdfn/lambda`), never by a relative path into the framework.",
      severity: "error",
      from: { path: "^examples/", pathNot: notTest },
      to: { path: framework, dependencyTypes: ["local"] },
    },
    forbid("framework-not-examples", "^(core|deploy|clients|bridge|functions|emulator|cli)/", "^examples/", "The framework works for any operator; only tests and benchmarks name the examples.", { tests: false }),
    forbid("cli-ships", "^cli/", "^(examples|test|bench)/", "The CLI is published; benchmarks, tests and examples are not.", { tests: false }),
    {
      name: "cli-plumbing-is-the-ground-floor",
      comment:
        "cli/'s shared plumbing (loading operators, esbuild, the .crdfn/env environment, signals) serves every command, so it imports none of them and none of cli/'s folders.",
      severity: "error",
      from: { path: "^cli/[^/]+\\.ts$", pathNot: [notTest, cliTop] },
      to: { path: [`^cli/(${cliFolders.join("|")})/`, cliTop] },
    },
    cliFolder(
      "cli-local-runs-no-command",
      "local",
      "The local stack is what `crdfn dev`, the benchmarks and the tests share, so what they show is the same: it is built from the layers and cli/'s plumbing, never from a command (admin/, generate/, the entry, a *-command.ts).",
    ),
    cliFolder(
      "cli-admin-stands-alone",
      "admin",
      "The admin commands act on a deployment as it runs (a local one: the .crdfn/env it left): they neither start the local stack nor write a project's files, so they import neither cli/local/ nor cli/generate/.",
    ),
    cliFolder(
      "cli-generate-stands-alone",
      "generate",
      "What writes a project's files follows from its operators and settings alone, never from a running stack or deployment.",
    ),
    {
      name: "functions-load-the-aws-sdk-lazily",
      comment: "A Lambda's usual invocation sends nothing to SQS: the SDK is imported where it is used (functions/runtime/sqs-client.ts), not at a cold start.",
      severity: "error",
      from: { path: "^functions/", pathNot: notTest },
      to: { path: "(^|/)node_modules/@aws-sdk/(client-sqs|credential-provider-node)/", dependencyTypesNot: ["type-only", "dynamic-import"] },
    },
    {
      name: "pubsub-client-loaded-lazily",
      comment: "Nothing on AWS loads the Pub/Sub client (gRPC, protobufs); on GCP the bridge imports it on its first publish, a function on its first re-send.",
      severity: "error",
      from: { path: "^(functions|bridge|clients)/", pathNot: notTest },
      to: { path: "(^|/)node_modules/@google-cloud/pubsub/", dependencyTypesNot: ["type-only", "dynamic-import"] },
    },
    { name: "no-circular", severity: "error", from: {}, to: { circular: true } },
  ],
  options: {
    doNotFollow: { path: "node_modules" },
    tsPreCompilationDeps: true,
    tsConfig: { fileName: "tsconfig.json" },
    enhancedResolveOptions: { exportsFields: ["exports"], conditionNames: ["crdfn-source", "import", "require", "node", "default"] },
  },
};
