// Every command's --help ends with examples to copy.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import type { Command } from "commander";
import { envVariableNames } from "../bridge/config.ts";
import { program } from "./program.ts";

function helpOf(cmd: Command): string {
  let text = "";
  cmd.configureOutput({ writeOut: (s) => (text += s), writeErr: (s) => (text += s) }).exitOverride();
  try {
    cmd.outputHelp();
  } catch {
    // outputHelp does not exit; exitOverride only guards against it.
  }
  return text;
}

function all(cmd: Command, path: string[] = []): Array<[string, Command]> {
  return cmd.commands.flatMap((c) => [[[...path, c.name()].join(" "), c] as [string, Command], ...all(c, [...path, c.name()])]);
}

describe("crdfn --help", () => {
  const commands = [["crdfn", program()] as [string, Command], ...all(program())];

  it("covers every command, init included", () => {
    const names = commands.map(([n]) => n);
    for (const n of ["init", "dev", "cluster up", "bridge", "status", "dlq list", "dlq redrive", "crd"]) assert.ok(names.includes(n), n);
  });

  for (const [name, cmd] of commands) {
    it(`${name} --help ends with an Examples: block of crdfn command lines`, () => {
      const help = helpOf(cmd);
      const at = help.lastIndexOf("\nExamples:\n");
      assert.ok(at >= 0, `${name} --help has no Examples: block:\n${help}`);
      const lines = help
        .slice(at + "\nExamples:\n".length)
        .trimEnd()
        .split("\n");
      assert.ok(lines.length > 0 && lines.every((l) => l.startsWith("  $ ")), `${name}: every example is a "  $ " command line:\n${lines.join("\n")}`);
      assert.ok(
        lines.some((l) => l.includes(name === "crdfn" ? "crdfn" : `crdfn ${name}`)),
        `${name}: an example runs the command itself`,
      );
    });
  }

  it("crdfn bridge: every flag names, in brackets, a variable the bridge reads", () => {
    const bridge = commands.find(([n]) => n === "bridge")?.[1];
    assert.ok(bridge);
    const named = [...helpOf(bridge).matchAll(/\[([A-Z][A-Z0-9_]+)\]/g)].map((m) => m[1] ?? "");
    assert.equal(named.length, 12, named.join(", "));
    for (const name of named) assert.ok(name === "CRDFN_CONFIG_FILE" || envVariableNames.includes(name), `${name} is not read by the bridge`);
  });
});
