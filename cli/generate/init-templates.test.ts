import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, it } from "node:test";
import { packageRoot } from "../../emulator/paths.ts";
import { CHECKOUT_SERVERLESS, projectFiles, projectNames, serverlessYml } from "./init-templates.ts";

const REGENERATE = `node_modules/.bin/node --input-type=module -e 'const m = await import("./cli/generate/init-templates.ts"); process.stdout.write(m.serverlessYml(m.CHECKOUT_SERVERLESS.service, m.CHECKOUT_SERVERLESS.place))' > serverless.yml`;

describe("serverless.yml: one template for crdfn init's projects and this repository", () => {
  it("the repository's serverless.yml is the template rendered for this checkout", () => {
    const expected = serverlessYml(CHECKOUT_SERVERLESS.service, CHECKOUT_SERVERLESS.place);
    assert.equal(
      readFileSync(join(packageRoot, "serverless.yml"), "utf8"),
      expected,
      `serverless.yml differs from cli/generate/init-templates.ts's template: change the template, then ${REGENERATE}`,
    );
  });

  it("a project's differs from it only in its service, where generate writes, and where crdfn comes from", () => {
    const project = projectFiles(projectNames("motd"), {
      crdfn: "0",
      zod: "0",
      typescript: "0",
      typesNode: "0",
      serverless: "0",
      serverlessEsbuild: "0",
      functionsFramework: "0",
    }).get("serverless.yml")!;
    const checkout = serverlessYml(CHECKOUT_SERVERLESS.service, CHECKOUT_SERVERLESS.place);
    const asProject = checkout
      .replaceAll(CHECKOUT_SERVERLESS.place.generated, "deploy/serverless")
      .replace("plugins: ./cli/esbuild-plugins.ts\n    conditions: [crdfn-source]", "plugins: ./node_modules/crdfn/dist/cli/esbuild-plugins.js")
      .replace(/^service: crdfn$/m, "service: motd")
      .replace("secrets crdfn/prod/event-keys", "secrets motd/prod/event-keys");
    assert.equal(project, asProject);
  });
});
