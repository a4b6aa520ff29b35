// A user's crdfn project for tests: its files written into a folder inside this checkout (so its
// `import "crdfn"` resolves here, as it would to an installed crdfn), its deploy files written by
// `crdfn generate`, and those applied to a real cluster as a user applies them.
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { parseAllDocuments, stringify } from "yaml";
import type { DeploySettingsInput } from "../../deploy/settings.ts";
import { generate, writeGenerated, type GenerateFlags, type Generated } from "../../cli/generate/generate.ts";
import { packageRoot } from "../../emulator/paths.ts";
import type { Kubectl } from "./identities.ts";

export interface Project {
  dir: string;
  /** Writes (or rewrites) files of the project, by path inside it. */
  write(files: Record<string, string>): void;
  /** `crdfn generate` in the project (its crdfn.deploy.yaml, plus these flags): writes the deploy files. */
  generate(flags?: GenerateFlags): Promise<Generated>;
  remove(): void;
}

/** The Lambda entry `crdfn init` writes beside an operator module. */
export const lambdaEntry = (module = "./operator.ts"): string =>
  `import { lambdaHandler } from "crdfn/lambda";\nimport operator from "${module}";\nexport const handler = lambdaHandler(operator);\n`;

/** Deploy settings with every value crdfn cannot know filled in, for `project`. */
export function deploySettings(project: string, extra: DeploySettingsInput = {}): string {
  return stringify({
    project,
    cluster: "test",
    out: "deploy",
    namespaces: ["default"],
    bridge: { image: `registry.example.com/${project}/crdfn-bridge:0.1.0` },
    queues: { urlBase: "https://sqs.eu-west-1.amazonaws.com/123456789012" },
    ...extra,
  });
}

export function makeProject(name: string, files: Record<string, string>): Project {
  mkdirSync(join(packageRoot, ".crdfn"), { recursive: true });
  const dir = mkdtempSync(join(packageRoot, ".crdfn", `project-${name}-`));
  const write = (more: Record<string, string>) => {
    for (const [path, text] of Object.entries(more)) {
      mkdirSync(dirname(join(dir, path)), { recursive: true });
      writeFileSync(join(dir, path), text);
    }
  };
  write(files);
  return {
    dir,
    write,
    async generate(flags = {}) {
      const g = await generate([], { settings: "crdfn.deploy.yaml", ...flags }, dir);
      writeGenerated(g);
      return g;
    },
    remove: () => rmSync(dir, { recursive: true, force: true }),
  };
}

type Manifest = { kind: string; metadata: { name: string; namespace?: string } };

/**
 * `kubectl apply --server-side -k <deployDir>` as the admin, after creating the namespaces it
 * holds (so that the namespaced objects after them can be applied in the same run). Returns
 * the objects applied.
 */
export async function applyDeployFiles(admin: Kubectl, deployDir: string): Promise<Manifest[]> {
  const objects = parseAllDocuments(await admin(["kustomize", deployDir])).map((d) => d.toJS() as Manifest);
  for (const ns of objects.filter((o) => o.kind === "Namespace")) {
    await admin(["apply", "--server-side", "-f", "-"], JSON.stringify({ apiVersion: "v1", kind: "Namespace", metadata: { name: ns.metadata.name } }));
  }
  await admin(["apply", "--server-side", "-k", deployDir]);
  for (const crd of objects.filter((o) => o.kind === "CustomResourceDefinition")) {
    await admin(["wait", "--for=condition=Established", "--timeout=60s", `crd/${crd.metadata.name}`]);
  }
  return objects;
}
