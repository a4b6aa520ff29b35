// The files of a project made by `crdfn init`: one operator (zod spec, one owned ConfigMap,
// status), a sample object, a unit test of its reconcile, its Lambda and Cloud Run entries, its
// deploy settings and serverless.yml, and the project settings. The README's "Your own project"
// section prints some of these files for a project named "motd" (a test keeps them equal).
import { pluralOf } from "../../core/operator.ts";
import { ESM_REQUIRE_BANNER } from "../bundle.ts";

export interface ProjectNames {
  /** The folder and npm package name, a DNS-1123 label: "motd", "my-app". */
  name: string;
  /** The resource's kind: "Motd", "MyApp". */
  kind: string;
  plural: string;
  /** The reconcile parameter: "motd", "myApp". */
  variable: string;
}

export function projectNames(name: string): ProjectNames {
  const words = name.split("-").filter((w) => w.length > 0);
  const kind = words.map((w) => w[0]!.toUpperCase() + w.slice(1)).join("");
  return { name, kind, plural: pluralOf(kind), variable: kind[0]!.toLowerCase() + kind.slice(1) };
}

export interface ProjectVersions {
  crdfn: string;
  zod: string;
  typescript: string;
  typesNode: string;
  /** The Serverless Framework and its esbuild plugin, as crdfn's own serverless.yml is tested with. */
  serverless: string;
  serverlessEsbuild: string;
  /** For http.ts (Cloud Run functions). */
  functionsFramework: string;
}

/** The one Node minimum crdfn states: 22.18 is the first Node 22 that runs TypeScript files (type stripping) without a flag. */
export const NODE_ENGINES = ">=22.18";

const json = (value: unknown): string => `${JSON.stringify(value, null, 2)}\n`;

function packageJson(n: ProjectNames, v: ProjectVersions): string {
  return json({
    name: n.name,
    version: "0.1.0",
    private: true,
    type: "module",
    // Cloud Run functions load the source folder's main: http.ts registers the operator's function.
    main: "http.ts",
    // .npmrc's engine-strict makes npm refuse to install on an older Node, saying which it needs.
    engines: { node: NODE_ENGINES },
    scripts: {
      // Node's test runner on the *.test.ts files; unlike `node --test`, fails when no test ran.
      test: "crdfn test",
      typecheck: "tsc",
      dev: "crdfn dev --operator operator.ts --apply sample.yaml",
      crd: "crdfn crd operator.ts",
      generate: "crdfn generate",
      // Checks the bundle and the stack offline; its stage's params reach no cluster (serverless.yml).
      // The Framework reads telemetry and update checks from its environment only, before serverless.yml.
      package: "SLS_TELEMETRY_DISABLED=1 SLS_NOTIFICATIONS_MODE=off serverless package --stage package",
    },
    dependencies: { crdfn: v.crdfn, zod: v.zod, "@google-cloud/functions-framework": v.functionsFramework },
    devDependencies: { "@types/node": v.typesNode, typescript: v.typescript, serverless: v.serverless, "serverless-esbuild": v.serverlessEsbuild },
  });
}

const tsconfig = json({
  compilerOptions: {
    target: "es2023",
    module: "nodenext",
    moduleResolution: "nodenext",
    strict: true,
    noEmit: true,
    // Node runs these files as they are: imports name the .ts file, and only erasable syntax.
    allowImportingTsExtensions: true,
    erasableSyntaxOnly: true,
    verbatimModuleSyntax: true,
    skipLibCheck: true,
    types: ["node"],
  },
  include: ["*.ts"],
});

function operatorTs(n: ProjectNames): string {
  const v = n.variable;
  return `// Each ${n.kind} object becomes a ConfigMap holding its lines, and reports how many.
import { defineOperator, PermanentError } from "crdfn";
import { z } from "zod";

export default defineOperator({
  resource: {
    group: "demo.example.com", // your API group: a DNS name you own
    version: "v1",
    plural: "${n.plural}",
    kind: "${n.kind}",
    // kubectl get's columns; crdfn adds Ready, Age and (-o wide) Reason, Attempts and Next.
    printerColumns: [{ name: "Lines", type: "integer", jsonPath: ".status.lines" }],
  },
  // Validated on every reconcile; the CRD's OpenAPI schema is generated from it.
  spec: z.object({
    lines: z.array(z.string().min(1).max(80)).min(1).max(20),
    audience: z.enum(["everyone", "admins"]).default("everyone"),
  }),
  // What reconcile reports: checked before it is written, and the CRD's status schema.
  status: z.object({ lines: z.number().int() }),
  owns: [{ group: "", version: "v1", kind: "ConfigMap" }],
  // Pure and synchronous: no I/O, no clock but ctx.now, no randomness. Throwing PermanentError
  // sets Ready=False with its reason and records an Event; TemporaryError(message, seconds)
  // retries later; any other throw shows as Ready=False ReconcileError and is retried.
  reconcile(${v}) {
    if (${v}.spec.lines.some((line) => line.includes("\\t"))) {
      throw new PermanentError("lines must not contain tabs", "TabsInLines");
    }
    return {
      children: [
        {
          apiVersion: "v1",
          kind: "ConfigMap",
          metadata: { name: \`\${${v}.metadata.name}-${n.name}\`, labels: { audience: ${v}.spec.audience } },
          data: { text: ${v}.spec.lines.join("\\n") },
        },
      ],
      status: { lines: ${v}.spec.lines.length },
    };
  },
});
`;
}

function operatorTestTs(n: ProjectNames): string {
  return `// The reconcile, tested without a cluster: \`npm test\`.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { PermanentError } from "crdfn";
import { reconcileContext, testObject } from "crdfn/testing";
import operator from "./operator.ts";

const now = new Date("2026-01-01T00:00:00Z");

describe("${n.kind} reconcile", () => {
  it("wants a ConfigMap holding the lines, for everyone by default", () => {
    // The object as a manifest writes it; testObject validates the spec and fills its defaults.
    const object = testObject(operator, { metadata: { name: "welcome" }, spec: { lines: ["Welcome.", "Backups run at 02:00 UTC."] } });
    // With the operator, ctx.children and ctx.references answer as the runtime does.
    const result = operator.reconcile(object, reconcileContext(operator, { now }));
    assert.deepEqual(result.children, [
      {
        apiVersion: "v1",
        kind: "ConfigMap",
        metadata: { name: "welcome-${n.name}", labels: { audience: "everyone" } },
        data: { text: "Welcome.\\nBackups run at 02:00 UTC." },
      },
    ]);
    assert.deepEqual(result.status, { lines: 2 });
  });

  it("refuses tabs for good: Ready=False with reason TabsInLines", () => {
    const object = testObject(operator, { metadata: { name: "tabs" }, spec: { lines: ["a\\tb"] } });
    assert.throws(() => operator.reconcile(object, reconcileContext(operator, { now })), (e) => e instanceof PermanentError && e.reason === "TabsInLines");
  });
});
`;
}

function sampleYaml(n: ProjectNames): string {
  return `apiVersion: demo.example.com/v1
kind: ${n.kind}
metadata:
  name: welcome
  namespace: default
spec:
  lines:
    - Welcome to the cluster.
    - Backups run at 02:00 UTC.
`;
}

function lambdaTs(): string {
  return `// The Lambda entry (serverless.yml's functions come from crdfn generate: handler lambda.handler).
import { lambdaHandler } from "crdfn/lambda";
import operator from "./operator.ts";

export const handler = lambdaHandler(operator);
`;
}

function httpTs(n: ProjectNames): string {
  return `// The Cloud Run functions entry (functions-framework): HTTP, one key event per request, or
// CloudEvents (Pub/Sub push):
//   npx functions-framework --source http.ts --target ${n.name}
//   npx functions-framework --source http.ts --target ${n.name}-events --signature-type cloudevent
import { cloudEvent, http } from "@google-cloud/functions-framework";
import { cloudEventHandler, httpHandler } from "crdfn/http";
import operator from "./operator.ts";

http("${n.name}", httpHandler(operator));
cloudEvent("${n.name}-events", cloudEventHandler(operator));
`;
}

function deploySettings(n: ProjectNames): string {
  return `# Deploy settings: \`npm run generate\` (crdfn generate) writes deploy/ from them and the operator:
# the CRD, the function's RBAC and admission policy, the bridge, a kustomization, and what
# serverless.yml reads (deploy/serverless/). Then: kubectl apply --server-side -k deploy; npx serverless deploy.
project: ${n.name}              # names this project's bridge (crdfn-bridge-${n.name}) and its queues (crdfn-${n.name}-…)
operators:
  - module: operator.ts
    handler: lambda.handler
out: deploy
namespaces: [default]         # the namespaces served: every grant is a Role in them (kube-system only if listed)

# What crdfn cannot know: \`crdfn generate\` refuses, naming each, until these are set.
cluster:                      # the cluster's name, in every event (your EKS cluster's, say)
bridge:
  image:                      # the bridge image you push: docker build -f node_modules/crdfn/infra/bridge/Dockerfile -t <image> node_modules/crdfn
queues:
  urlBase:                    # https://sqs.<region>.amazonaws.com/<your account id>
`;
}

/** Where a serverless.yml finds crdfn and what `crdfn generate` writes. */
export interface ServerlessPlace {
  /** The folder of the generated functions.yml and resources.yml. */
  generated: string;
  /** crdfn installed from npm (a project), or this checkout's sources (crdfn's own serverless.yml). */
  crdfn: "package" | "checkout";
}

/** A project's: crdfn from node_modules, generated into deploy/. */
const PROJECT_PLACE: ServerlessPlace = { generated: "deploy/serverless", crdfn: "package" };

/** This repository's serverless.yml (the examples' functions) is the template below for this checkout; cli/generate/init-templates.test.ts keeps the file equal to it. */
export const CHECKOUT_SERVERLESS = { service: "crdfn", place: { generated: "infra/generated/serverless", crdfn: "checkout" } } as const satisfies {
  service: string;
  place: ServerlessPlace;
};

export function serverlessYml(service: string, place: ServerlessPlace = PROJECT_PLACE): string {
  // A checkout's operators import `crdfn` from its sources (the crdfn-source condition); an installed crdfn needs no condition.
  const plugin = place.crdfn === "package" ? "./node_modules/crdfn/dist/cli/esbuild-plugins.js" : "./cli/esbuild-plugins.ts\n    conditions: [crdfn-source]";
  return `# One function per operator on AWS Lambda, with its queue, dead-letter queue and roles: generated
# into ${place.generated}/ by \`npm run generate\` (crdfn generate), from the operators and crdfn.deploy.yaml.
#   npx serverless deploy --stage prod --region <region> --param="eksCluster=<cluster>" \\
#     --param="kubeServer=<API server URL>" --param="kubeCaData=<base64 CA>" \\
#     --param="eventKeysLabel=<staging label of the versions to deploy of the secrets ${service}/prod/event-keys/*>"
# Each function verifies its operator's events with the keys in its Secrets Manager secret (crdfn's docs/security.md);
# each function's IAM role needs an EKS access entry (the generated functions/README.md).
service: ${service}
frameworkVersion: '3'
# serverless 3's schema lists runtimes up to nodejs20.x; nodejs22.x is a valid Lambda runtime.
configValidationMode: warn

plugins:
  - serverless-esbuild

params:
  default:
    kubeAuth: eks             # each function's IAM role signs its EKS token
    logLevel: info
    maxConcurrency: 10        # concurrent invocations per queue: protects the API server
    # Required: eksCluster, kubeServer, kubeCaData, eventKeysLabel.
  # \`npm run package\` (serverless package --stage package) checks the bundle and the stack with no
  # cluster and no AWS account: these values reach nothing (.invalid). Never deploy this stage.
  package:
    eksCluster: not-deployed
    kubeServer: https://kube-api.not-deployed.invalid
    kubeCaData: bm90LWRlcGxveWVk
    eventKeysLabel: not-deployed

custom:
  timeoutSeconds: 30
  visibilityTimeoutSeconds: 180   # at least 6 × the function timeout
  batchSize: 10
  esbuild:
    bundle: true
    minify: true
    platform: node
    target: node22
    format: esm
    outputFileExtension: .mjs
    exclude: []                 # bundle the AWS SDK too: the versions crdfn was tested with
    banner:
      js: ${JSON.stringify(ESM_REQUIRE_BANNER)}
    # Leaves client-node out of the bundle: a faster cold start.
    plugins: ${plugin}

provider:
  name: aws
  runtime: nodejs22.x
  architecture: arm64
  memorySize: 256
  timeout: \${self:custom.timeoutSeconds}
  logRetentionInDays: 14
  # The bucket serverless creates for the packaged zips and templates: nothing in it is public.
  deploymentBucket:
    blockPublicAccess: true
  environment:
    CRDFN_KUBE_AUTH: \${param:kubeAuth}
    CRDFN_KUBE_SERVER: \${param:kubeServer}
    CRDFN_KUBE_CA_DATA: \${param:kubeCaData}
    CRDFN_EKS_CLUSTER: \${param:eksCluster}
    LOG_LEVEL: \${param:logLevel}

package:
  individually: true

functions: \${file(./${place.generated}/functions.yml)}

resources: \${file(./${place.generated}/resources.yml)}
`;
}

function readme(n: ProjectNames): string {
  return `# ${n.name}

A Kubernetes operator for \`${n.kind}\` objects, written with [crdfn](https://www.npmjs.com/package/crdfn):
its reconcile logic is a pure function that runs as a serverless function.

| file | what |
|---|---|
| \`operator.ts\` | the operator: the resource, its zod spec schema, the kinds it owns, \`reconcile\` |
| \`operator.test.ts\` | unit tests of \`reconcile\`, no cluster needed |
| \`sample.yaml\` | a \`${n.kind}\` object to try |
| \`lambda.ts\`, \`http.ts\` | the function's entries: AWS Lambda, Cloud Run functions (functions-framework) |
| \`crdfn.deploy.yaml\`, \`serverless.yml\` | deploy settings, and the Lambda stack that reads what \`crdfn generate\` writes |

Node ${NODE_ENGINES.slice(2)} or newer.

## Next

\`\`\`sh
npm install
npm test            # the reconcile unit tests (Node's test runner; fails when none ran)
npm run typecheck   # tsc, strict
npm run dev         # a local control plane + queue, this operator, and sample.yaml applied; Ctrl-C stops
npm run crd         # the CustomResourceDefinition generated from the spec schema
\`\`\`

\`npm run dev\` prints \`✔ ${n.kind} welcome reconciled …\` and a kubectl command line for the
local cluster; try \`kubectl --kubeconfig .crdfn/kubeconfig get ${n.plural},configmaps\`.
It needs Go ≥ 1.24 and a JDK ≥ 17 with Maven the first time (the control plane and the queue
are built and cached in \`~/.cache/crdfn/\`).

## Deploying

Fill in what \`crdfn.deploy.yaml\` leaves empty (the cluster's name, the bridge image, your
account's SQS URL base), then:

\`\`\`sh
export SLS_TELEMETRY_DISABLED=1 SLS_NOTIFICATIONS_MODE=off   # the Serverless Framework: no telemetry, no update check
docker build -f node_modules/crdfn/infra/bridge/Dockerfile -t <image> node_modules/crdfn && docker push <image>
npm run generate                            # deploy/: the CRD, RBAC, admission policy, bridge, Serverless resources
kubectl apply --server-side -k deploy       # into the cluster
npx serverless deploy --stage prod --param="eksCluster=<cluster>" --param="kubeServer=<URL>" --param="kubeCaData=<CA>" --param="eventKeysLabel=<label>"
\`\`\`

\`npm run package\` packages the same stack offline, with no AWS account. \`serverless\` warns
\`Invalid configuration encountered … at 'provider.runtime'\`: its v3 schema predates nodejs22.x,
which Lambda runs; \`configValidationMode: warn\` in serverless.yml keeps it a warning.
\`deploy/functions/README.md\` and \`deploy/bridge/README.md\` say how the function's and the
bridge's AWS roles reach the cluster.
`;
}

/** The project's files by path, in the order they are listed. */
export function projectFiles(n: ProjectNames, v: ProjectVersions): Map<string, string> {
  return new Map([
    ["package.json", packageJson(n, v)],
    ["tsconfig.json", tsconfig],
    ["operator.ts", operatorTs(n)],
    ["operator.test.ts", operatorTestTs(n)],
    ["sample.yaml", sampleYaml(n)],
    ["lambda.ts", lambdaTs()],
    ["http.ts", httpTs(n)],
    ["crdfn.deploy.yaml", deploySettings(n)],
    ["serverless.yml", serverlessYml(n.name)],
    ["README.md", readme(n)],
    [".gitignore", "node_modules/\n.crdfn/\n.serverless/\n.esbuild/\n"],
    [".npmrc", "engine-strict=true\n"],
  ]);
}
