// `npm run gen:crds`: regenerates infra/crds/ from the operators' zod schemas.
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { CRD_DIR, crdFiles } from "./crds.ts";
import { operators } from "./operators.ts";

mkdirSync(CRD_DIR, { recursive: true });
for (const [file, text] of crdFiles(operators)) {
  writeFileSync(join(CRD_DIR, file), text);
  console.log(`wrote ${join(CRD_DIR, file)}`);
}
