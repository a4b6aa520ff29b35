// `crdfn crd`: the CustomResourceDefinition generated from an operator's zod spec schema.
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { Command } from "commander";
import { crdFiles } from "../core/operator-crd.ts";
import { selectOperators } from "./operators.ts";

export function crdCommand(): Command {
  return new Command("crd")
    .description("print the CRD YAML generated from each operator's zod spec schema (default: the examples of a crdfn checkout)")
    .argument("[operator-files...]", "modules whose default export is defineOperator({...})")
    .option("--out-dir <dir>", "write one file per CRD into this folder instead of printing")
    .addHelpText("after", "\nExamples:\n  $ crdfn crd operator.ts > crd.yaml\n  $ crdfn crd --out-dir deploy/crds operator.ts")
    .action(async (files: string[], o: { outDir?: string }) => {
      const generated = crdFiles(await selectOperators(files, false));
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
