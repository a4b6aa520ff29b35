// The architecture's layering, checked on every `npm test` (as kopf does with import-linter).
//   core/      the event contract and operator API: pure, no client library, no I/O
//   bridge/    in-cluster watcher → queue; never imports functions/
//   functions/ reconcile runtime, FaaS adapters, example operators; never imports bridge/
//   emulator/  local control plane + queue for tests and `crdfn dev`; dev-only
//   cli/, test/, bench/ compose everything
const clientLibraries = "^(@kubernetes/client-node|@aws-sdk/|@smithy/|@google-cloud/|@aws-lambda-powertools/|pino|prom-client|undici|ws)";
const nodeIo = "^(node:)?(fs|net|http|https|http2|child_process|dgram|dns|tls|cluster|worker_threads)(/|$)";

module.exports = {
  forbidden: [
    {
      name: "core-is-pure",
      comment: "core/ holds the contracts both sides share; it must not pull in a client library or do I/O.",
      severity: "error",
      from: { path: "^core/", pathNot: "\\.test\\.ts$" },
      to: { path: [clientLibraries, nodeIo], dependencyTypesNot: ["type-only"] },
    },
    {
      name: "core-imports-no-layer",
      severity: "error",
      from: { path: "^core/" },
      to: { path: "^(bridge|functions|emulator|cli|test|bench)/" },
    },
    {
      name: "bridge-not-functions",
      comment: "The bridge and the functions meet only through the event contract in core/.",
      severity: "error",
      from: { path: "^bridge/" },
      to: { path: "^functions/" },
    },
    {
      name: "functions-not-bridge",
      severity: "error",
      from: { path: "^functions/" },
      to: { path: "^bridge/" },
    },
    {
      name: "production-not-dev-tooling",
      comment: "What ships (bridge, functions) must not depend on the emulator, the CLI or tests.",
      severity: "error",
      from: { path: "^(bridge|functions)/", pathNot: "\\.test\\.ts$" },
      to: { path: "^(emulator|cli|test|bench)/" },
    },
    {
      name: "emulator-is-infrastructure-only",
      severity: "error",
      from: { path: "^emulator/" },
      to: { path: "^(bridge|functions|cli|test|bench)/" },
    },
    { name: "no-circular", severity: "error", from: {}, to: { circular: true } },
  ],
  options: {
    doNotFollow: { path: "node_modules" },
    tsPreCompilationDeps: true,
    tsConfig: { fileName: "tsconfig.json" },
    enhancedResolveOptions: { exportsFields: ["exports"], conditionNames: ["import", "require", "node", "default"] },
  },
};
