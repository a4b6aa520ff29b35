// The files of a project made by `crdfn init`: one operator (zod spec, one owned ConfigMap,
// status), a sample object, a unit test of its reconcile, and the project settings. The README's
// "Your own project" section prints these files for a project named "motd" (a test keeps them equal).
import { pluralOf } from "../core/operator.ts";

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
}

const json = (value: unknown): string => `${JSON.stringify(value, null, 2)}\n`;

function packageJson(n: ProjectNames, v: ProjectVersions): string {
  return json({
    name: n.name,
    version: "0.1.0",
    private: true,
    type: "module",
    // 22.18 is the first Node 22 that runs TypeScript files (type stripping) without a flag.
    engines: { node: ">=22.18" },
    scripts: {
      test: "node --test",
      typecheck: "tsc",
      dev: "crdfn dev --operator operator.ts --apply sample.yaml",
      crd: "crdfn crd operator.ts",
    },
    dependencies: { crdfn: v.crdfn, zod: v.zod },
    devDependencies: { "@types/node": v.typesNode, typescript: v.typescript },
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
    printerColumns: [
      { name: "Lines", type: "integer", jsonPath: ".status.lines" },
      { name: "Ready", type: "string", jsonPath: '.status.conditions[?(@.type=="Ready")].status' },
    ],
  },
  // Validated on every reconcile; the CRD's OpenAPI schema is generated from it.
  spec: z.object({
    lines: z.array(z.string().min(1).max(80)).min(1).max(20),
    audience: z.enum(["everyone", "admins"]).default("everyone"),
  }),
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
    // The spec as a manifest writes it; testObject validates it and fills the schema's defaults.
    const object = testObject(operator, { name: "welcome", spec: { lines: ["Welcome.", "Backups run at 02:00 UTC."] } });
    const result = operator.reconcile(object, reconcileContext({ now }));
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
    const object = testObject(operator, { name: "tabs", spec: { lines: ["a\\tb"] } });
    assert.throws(() => operator.reconcile(object, reconcileContext({ now })), (e) => e instanceof PermanentError && e.reason === "TabsInLines");
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

function readme(n: ProjectNames): string {
  return `# ${n.name}

A Kubernetes operator for \`${n.kind}\` objects, written with [crdfn](https://www.npmjs.com/package/crdfn):
its reconcile logic is a pure function that runs as a serverless function.

| file | what |
|---|---|
| \`operator.ts\` | the operator: the resource, its zod spec schema, the kinds it owns, \`reconcile\` |
| \`operator.test.ts\` | unit tests of \`reconcile\`, no cluster needed |
| \`sample.yaml\` | a \`${n.kind}\` object to try |

## Next

\`\`\`sh
npm install
npm test            # the reconcile unit tests (Node's test runner)
npm run typecheck   # tsc, strict
npm run dev         # a local control plane + queue, this operator, and sample.yaml applied; Ctrl-C stops
npm run crd         # the CustomResourceDefinition generated from the spec schema
\`\`\`

\`npm run dev\` prints \`✔ ${n.kind} welcome reconciled …\` and a kubectl command line for the
local cluster; try \`kubectl --kubeconfig .crdfn/kubeconfig get ${n.plural},configmaps\`.
It needs Go ≥ 1.24 and a JDK ≥ 17 with Maven the first time (the control plane and the queue
are built and cached in \`~/.cache/crdfn/\`).

For production: \`npx crdfn crd operator.ts > crd.yaml\`, and a Lambda entry
\`lambda.ts\`: \`import { lambdaHandler } from "crdfn/lambda"; import operator from "./operator.ts"; export const handler = lambdaHandler(operator);\`
(\`crdfn/http\` has \`httpHandler\` / \`cloudEventHandler\` for Cloud Run functions).
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
    ["README.md", readme(n)],
    [".gitignore", "node_modules/\n.crdfn/\n"],
  ]);
}
