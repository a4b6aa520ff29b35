// `npm run check`'s formatter, function-length and one-import-per-module rules are only worth their place if they refuse
// what they are there to refuse: a probe file is placed in a production folder and each check
// must name it (as test/layers.test.ts does for the layering).
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { randomBytes } from "node:crypto";
import { rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { promisify } from "node:util";
import { describe, it } from "node:test";

const run = promisify(execFile);
const root = join(import.meta.dirname, "..");
const bin = (name: string) => join(root, "node_modules", ".bin", name);

/** Runs `command` on a probe file holding `source` at `dir`; its output when it refuses, "" when it passes. */
async function refusal(command: (file: string) => [string, string[]], dir: string, source: string): Promise<string> {
  const probe = join(dir, `style-probe-${randomBytes(4).toString("hex")}.ts`);
  writeFileSync(join(root, probe), source);
  try {
    const [file, args] = command(probe);
    await run(file, args, { cwd: root });
    return "";
  } catch (e) {
    const { stdout = "", stderr = "" } = e as { stdout?: string; stderr?: string };
    return `${stdout}${stderr}` || String(e);
  } finally {
    rmSync(join(root, probe), { force: true });
  }
}

const prettier = (file: string): [string, string[]] => [bin("prettier"), ["--check", file]];
/** A function of `lines` statements, each on a line of its own. */
const longFunction = (lines: number) => `export function long(): number {\n  let n = 0;\n${"  n += 1;\n".repeat(lines - 4)}  return n;\n}\n`;

describe("the style checks of npm run check", { timeout: 300_000 }, () => {
  it("the formatter refuses a file it would format otherwise, and passes one it formatted", async () => {
    const found = await refusal(prettier, "core", "export const a = {b:1,\n\n\n  c:2}\n");
    assert.match(found, /style-probe-[0-9a-f]+\.ts/);
    assert.equal(await refusal(prettier, "core", "export const a = { b: 1, c: 2 };\n"), "");
  });

  it("the length rule refuses a production function over 100 lines, passes one of 100, and leaves tests alone (a describe holds its cases); a module imported twice is refused", async () => {
    // One ESLint run for the three probes: its type-aware setup is most of its time.
    const id = randomBytes(4).toString("hex");
    const probes = {
      over: join("core", `style-probe-${id}-over.ts`),
      at: join("bridge", `style-probe-${id}-at.ts`),
      test: join("core", `style-probe-${id}.test.ts`),
      twice: join("core", `style-probe-${id}-twice.ts`),
    };
    writeFileSync(join(root, probes.over), longFunction(102));
    writeFileSync(join(root, probes.at), longFunction(100));
    writeFileSync(join(root, probes.test), longFunction(150));
    writeFileSync(
      join(root, probes.twice),
      'import { ConfigError } from "./config-error.ts";\nimport { parseSettings } from "./config-error.ts";\n\nexport const both = [ConfigError, parseSettings];\n',
    );
    try {
      const out = await run(bin("eslint"), ["--format", "json", ...Object.values(probes)], { cwd: root, maxBuffer: 16 * 1024 * 1024 }).then(
        (r) => r.stdout,
        (e: { stdout?: string }) => e.stdout ?? "[]",
      );
      const rules = (file: string) =>
        (JSON.parse(out) as Array<{ filePath: string; messages: Array<{ ruleId: string | null }> }>)
          .find((r) => r.filePath === join(root, file))
          ?.messages.map((m) => m.ruleId) ?? [];
      assert.deepEqual(rules(probes.over), ["max-lines-per-function"]);
      assert.deepEqual(rules(probes.at), []);
      assert.deepEqual(rules(probes.test), []);
      assert.deepEqual(rules(probes.twice), ["no-duplicate-imports"]);
    } finally {
      for (const file of Object.values(probes)) rmSync(join(root, file), { force: true });
    }
  });
});
