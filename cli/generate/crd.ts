// `crdfn crd`: the CustomResourceDefinition generated from an operator's zod spec schema.
import { mkdirSync, writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { Command } from "commander";
import { crdFiles } from "../../deploy/crd.ts";
import { clusterStoredVersions, keptNotes, refuseDroppedVersions } from "./crd-versions.ts";
import { selectOperators } from "../operators.ts";

export function crdCommand(): Command {
  return new Command("crd")
    .description("print the CRD YAML generated from each operator's zod spec schema (default: the examples of a crdfn checkout)")
    .argument("[operator-files...]", "modules whose default export is defineOperator({...})")
    .option("--out-dir <dir>", "write one file per CRD into this folder instead of printing (a version the file there could store is never dropped)")
    .option("--kubeconfig <file>", "keep the versions this cluster still stores objects as (status.storedVersions), unserved")
    .option("--context <name>", "with --kubeconfig: its context (default: the current one)")
    .addHelpText(
      "after",
      "\nA version objects may still be stored as stays in the CRD: declare it retired in the operator\n" +
        '(resource.versions: [{ name: "v1beta1", served: false }, …]) or name the cluster with --kubeconfig.\n' +
        "\nExamples:\n  $ crdfn crd operator.ts > crd.yaml\n  $ crdfn crd --out-dir deploy/crds operator.ts\n  $ crdfn crd operator.ts --kubeconfig ~/.kube/config | kubectl apply --server-side -f -",
    )
    .action(async (files: string[], o: { outDir?: string; kubeconfig?: string; context?: string }) => {
      const operators = await selectOperators(files, false);
      let stored = new Map<string, string[]>();
      if (o.kubeconfig) stored = await clusterStoredVersions({ kubeconfig: resolve(o.kubeconfig), ...(o.context ? { context: o.context } : {}) }, operators);
      else if (o.outDir) refuseDroppedVersions(operators, resolve(o.outDir), o.outDir);
      for (const note of keptNotes(operators, stored)) console.error(`crdfn: ${note}`);
      const generated = crdFiles(operators, stored);
      if (!o.outDir) {
        console.log([...generated.values()].join("---\n"));
        return;
      }
      mkdirSync(o.outDir, { recursive: true });
      for (const [file, text] of generated) {
        writeFileSync(join(o.outDir, file), text);
        console.log(`wrote ${join(o.outDir, file)}`);
      }
    });
}
