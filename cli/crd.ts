// `crdfn crd`: the CustomResourceDefinition generated from an operator's zod spec schema.
import { Command } from "commander";
import { crdFiles } from "../functions/crds.ts";
import { selectOperators } from "./operators.ts";

export function crdCommand(): Command {
  return new Command("crd")
    .description("print the CRD YAML generated from each operator's zod spec schema (default: the example operators)")
    .argument("[operator-files...]", "modules whose default export is defineOperator({...})")
    .action(async (files: string[]) => {
      const ops = await selectOperators(files, false);
      console.log([...crdFiles(ops).values()].join("---\n"));
    });
}
