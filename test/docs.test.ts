// The code a reader copies from the README and docs/ is checked, not trusted: every TypeScript
// block is a whole file that type-checks under a project's strict settings (```ts file=name), or
// an excerpt of a file in this repository whose lines appear there in order (```ts from=path);
// every crdfn command line names a real command and only options it takes; every npm script
// exists; every YAML and JSON block parses; every relative link reaches a file.
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { dirname, join, relative } from "node:path";
import { after, describe, it } from "node:test";
import type { Command } from "commander";
import { parseAllDocuments } from "yaml";
import { packageRoot } from "../emulator/paths.ts";
import { program } from "../cli/program.ts";
import { projectFiles, projectNames } from "../cli/generate/init-templates.ts";
import { deploySettingKeys } from "../deploy/settings.ts";

interface Block {
  doc: string;
  line: number;
  lang: string;
  info: Record<string, string>;
  text: string;
}

const docs = [
  "README.md",
  ...readdirSync(join(packageRoot, "docs"))
    .filter((f) => f.endsWith(".md"))
    .map((f) => `docs/${f}`),
];

/** Fenced blocks, indented ones (inside list items) included, with their info string's key=value words. */
function blocksOf(doc: string): Block[] {
  const lines = readFileSync(join(packageRoot, doc), "utf8").split("\n");
  const blocks: Block[] = [];
  for (let i = 0; i < lines.length; i++) {
    const open = /^(\s*)```(\w+)(.*)$/.exec(lines[i]!);
    if (!open) continue;
    const [, indent, lang, rest] = open as unknown as [string, string, string, string];
    const body: string[] = [];
    let j = i + 1;
    for (; j < lines.length && lines[j]!.trim() !== "```"; j++) body.push(lines[j]!.slice(indent.length));
    const info = Object.fromEntries(
      rest
        .trim()
        .split(/\s+/)
        .filter((w) => w.includes("="))
        .map((w) => w.split("=", 2) as [string, string]),
    );
    blocks.push({ doc, line: i + 1, lang, info, text: body.join("\n") + "\n" });
    i = j;
  }
  return blocks;
}

const all = docs.flatMap(blocksOf);
const where = (b: Block) => `${b.doc}:${b.line}`;

describe("the README's and docs' code", () => {
  const folder = (() => {
    mkdirSync(join(packageRoot, ".crdfn"), { recursive: true });
    return mkdtempSync(join(packageRoot, ".crdfn", "docs-"));
  })();
  after(() => rmSync(folder, { recursive: true, force: true }));

  it("every TypeScript block is a whole file or an excerpt of one", () => {
    for (const b of all.filter((x) => x.lang === "ts" || x.lang === "typescript")) {
      assert.ok(
        b.info.file !== undefined || b.info.from !== undefined,
        `${where(b)}: a \`\`\`ts block needs file=<name> (type-checked) or from=<path> (an excerpt)`,
      );
    }
  });

  it("the whole files type-check under a project's strict settings, importing crdfn by its package name", () => {
    const files = all.filter((b) => b.info.file?.endsWith(".ts"));
    assert.ok(files.length >= 6, "the docs show operators");
    for (const b of files) {
      const path = join(folder, b.doc.replace(/[/.]/g, "_"), b.info.file!);
      mkdirSync(dirname(path), { recursive: true });
      writeFileSync(path, b.text);
    }
    writeFileSync(join(folder, "tsconfig.json"), JSON.stringify({ extends: relative(folder, join(packageRoot, "tsconfig.json")), include: ["**/*.ts"] }));
    try {
      execFileSync(join(packageRoot, "node_modules", ".bin", "tsc"), ["--noEmit", "-p", folder], { encoding: "utf8" });
    } catch (e) {
      assert.fail(`the docs' TypeScript does not type-check:\n${(e as { stdout?: string }).stdout ?? String(e)}`);
    }
  });

  it("each excerpt's lines appear in its file, in order", () => {
    const excerpts = all.filter((b) => b.info.from !== undefined);
    assert.ok(excerpts.length > 0);
    for (const b of excerpts) {
      const source = readFileSync(join(packageRoot, b.info.from!), "utf8")
        .split("\n")
        .map((l) => l.trim());
      let at = 0;
      for (const line of b.text.split("\n").map((l) => l.trim())) {
        if (line === "" || line === "// …") continue;
        const found = source.indexOf(line, at);
        assert.ok(found >= 0, `${where(b)}: "${line}" is not in ${b.info.from} (after line ${at})`);
        at = found + 1;
      }
    }
  });

  it("every crdfn command line names a command and only options it takes; every npm script exists", () => {
    const root = program();
    const scripts = new Set([
      ...Object.keys((JSON.parse(readFileSync(join(packageRoot, "package.json"), "utf8")) as { scripts: Record<string, string> }).scripts),
      // A project crdfn init makes has its own.
      ...Object.keys(
        (
          JSON.parse(
            projectFiles(projectNames("motd"), {
              crdfn: "0",
              zod: "0",
              typescript: "0",
              typesNode: "0",
              serverless: "0",
              serverlessEsbuild: "0",
              functionsFramework: "0",
            }).get("package.json")!,
          ) as { scripts: Record<string, string> }
        ).scripts,
      ),
      "start",
      "test",
    ]);
    let commands = 0;
    for (const b of all.filter((x) => x.lang === "sh")) {
      for (const raw of b.text.split("\n")) {
        const line = raw.replace(/#.*$/, "").trim();
        const npm = /^npm (?:run )?([\w:-]+)/.exec(line);
        if (npm && npm[1] !== "install") assert.ok(scripts.has(npm[1]!), `${where(b)}: npm script "${npm[1]}" does not exist`);
        const m = /^(?:npx (?:--yes )?(?:--package \S+ )?)?crdfn\s+(.*)$/.exec(line);
        if (!m) continue;
        commands++;
        const words = m[1]!.split(/\s+/);
        let cmd: Command = root;
        while (words.length > 0 && !words[0]!.startsWith("-")) {
          const next = cmd.commands.find((c) => c.name() === words[0]);
          if (!next) break;
          cmd = next;
          words.shift();
        }
        assert.notEqual(cmd, root, `${where(b)}: "${line}" names no crdfn command`);
        const longs = new Set(["--help", ...cmd.options.map((o) => o.long)]);
        for (const w of words.filter((x) => x.startsWith("--"))) {
          const flag = w.split("=")[0]!;
          assert.ok(longs.has(flag), `${where(b)}: crdfn ${cmd.name()} takes no ${flag}`);
        }
      }
    }
    assert.ok(commands >= 3, "the docs show crdfn commands");
  });

  it("docs/configuration.md documents every setting crdfn.deploy.yaml takes", () => {
    const text = readFileSync(join(packageRoot, "docs", "configuration.md"), "utf8");
    const documented = new Set([...text.matchAll(/^\| `([\w.[\]]+)` \|/gm)].map((m) => m[1]));
    assert.deepEqual(
      deploySettingKeys().filter((k) => !documented.has(k)),
      [],
    );
  });

  it("every YAML and JSON block parses", () => {
    for (const b of all.filter((x) => x.lang === "yaml")) {
      for (const d of parseAllDocuments(b.text)) assert.deepEqual(d.errors, [], `${where(b)}: ${d.errors.map((e) => e.message).join("; ")}`);
    }
    for (const b of all.filter((x) => x.lang === "json")) assert.doesNotThrow(() => JSON.parse(b.text), `${where(b)}: not JSON`);
  });

  it("every relative link reaches a file, and a heading where it names one", () => {
    // GitHub's anchors: the heading lower-cased, punctuation but hyphens dropped, spaces as hyphens.
    const anchors = (file: string) =>
      new Set(
        [...readFileSync(file, "utf8").matchAll(/^#+ (.*)$/gm)].map((h) =>
          h[1]!
            .toLowerCase()
            .replace(/[^\p{L}\p{N} _-]/gu, "")
            .replace(/ /g, "-"),
        ),
      );
    for (const doc of docs) {
      const text = readFileSync(join(packageRoot, doc), "utf8");
      for (const m of text.matchAll(/\]\(([^)#\s]*)(?:#([^)\s]*))?\)/g)) {
        const [, target, anchor] = m as unknown as [string, string, string | undefined];
        if (/^[a-z]+:/.test(target)) continue;
        const file = target === "" ? join(packageRoot, doc) : join(packageRoot, dirname(doc), target);
        assert.ok(existsSync(file), `${doc}: the link ${target} reaches nothing`);
        if (anchor !== undefined && file.endsWith(".md")) assert.ok(anchors(file).has(anchor), `${doc}: ${target}#${anchor} names no heading there`);
      }
    }
  });
});

// A figure in the README is a claim: it must come from a test that produces or bounds it, so a
// reader can rerun it, or from a setting whose value is checked here, or say that nothing times it.
describe("the README's figures", () => {
  const readme = readFileSync(join(packageRoot, "README.md"), "utf8");
  /** Prose units: a paragraph, a list item or a table row, outside fenced blocks. */
  const units = (() => {
    const out: string[] = [];
    let fenced = false;
    let cur: string[] = [];
    const flush = () => {
      if (cur.length > 0) out.push(cur.join(" "));
      cur = [];
    };
    for (const line of readme.split("\n")) {
      if (/^\s*```/.test(line)) {
        flush();
        fenced = !fenced;
        continue;
      }
      if (fenced) continue;
      if (line.trim() === "" || /^(- |\| |#)/.test(line)) flush();
      if (line.trim() !== "") cur.push(line.trim());
    }
    flush();
    return out;
  })();
  const figure = /\d(?:[\d,.]*\d)?(?:[–-]\d[\d.]*)? ?(?:ms|s|%|×|minutes?|seconds?)(?![\w-])/;
  const source = (file: string) => readFileSync(join(packageRoot, file), "utf8");
  /** Figures that are settings, not measurements: the phrase, and where its value is read. */
  const settings: Array<{ phrase: string; file?: string; value?: RegExp; why: string }> = [
    { phrase: "(up to 5 s)", file: "bridge/parent-tracker.ts", value: /OWN_CHILD_HOLD_MS = 5000;/, why: "the bridge's hold of its own child's announcement" },
    { phrase: "stalls for 120 s", file: "emulator/process.ts", value: /START_STALL_MS = 120_000;/, why: "the start-up's stall limit" },
    {
      phrase: "again after 5 minutes",
      file: "functions/runtime/config.ts",
      value: /CRDFN_EVENT_KEYS_SECRET_TTL: .*\.default\(300\)/,
      why: "a Lambda function's event keys' cache TTL",
    },
    { phrase: "new CRDs within 30 s", why: "kube-controller-manager's garbage collector rereads discovery every 30 s (its own constant)" },
  ];

  it("every sentence with a figure names the test that produces it, a checked setting, or says nothing times it", () => {
    const unsourced = units.filter(
      (u) => figure.test(u) && !/[\s`](?:test|bench)\/[\w/.-]+\.ts\b/.test(u) && !u.includes("no test times it") && !settings.some((s) => u.includes(s.phrase)),
    );
    assert.deepEqual(unsourced, [], "figures in the README without a test, a setting or a disclaimer");
    for (const s of settings) {
      assert.ok(readme.includes(s.phrase), `README: "${s.phrase}" (${s.why}) is gone: drop it from this list`);
      if (s.file !== undefined) assert.match(source(s.file), s.value!, `${s.file}: ${s.why} is no longer what the README says ("${s.phrase}")`);
    }
  });

  it("every test or bench file the README names exists", () => {
    for (const m of readme.matchAll(/`(?:[^`]*\s)?((?:test|bench)\/[\w/.-]+\.ts)\b/g))
      assert.ok(existsSync(join(packageRoot, m[1]!)), `README names ${m[1]}, which does not exist`);
  });

  it("the bounds the README quotes are the ones the tests assert", () => {
    const checks: Array<{ phrase: string; file: string; value: RegExp }> = [
      { phrase: "within the 10 s turn limit", file: "bridge/timer-turns.ts", value: /TURN_WAIT_MS = 10_000;/ },
      {
        phrase: "plus twice 40 messages",
        file: "test/fair-turns.test.ts",
        value: /const OBJECTS = 40;[\s\S]*TURN_WAIT_MS \+ \(2 \* OBJECTS \* 1000\) \/ throughput \+ 5000/,
      },
      { phrase: "after a 45 s hang", file: "test/api-server-hang.test.ts", value: /CRDFN_TEST_HANG_SECONDS \?\? 45\)/ },
      { phrase: "within 5 × its latency", file: "test/api-server-hang.test.ts", value: /const RATIO = 5;/ },
      { phrase: "outage + 4.4 s", file: "test/api-server-hang.test.ts", value: /CIRCUIT_MAX_MS = 2400;[\s\S]*RELIST_MAX_MS = 2000;/ },
      { phrase: "0 messages in 10 minutes", file: "test/bridge-failover.test.ts", value: /const OBJECTS = 1000;[\s\S]*CRDFN_TEST_IDLE_SECONDS \?\? 30\)/ },
      { phrase: "20 rounds of 10 rapid", file: "test/stale-snapshots.test.ts", value: /const ROUNDS = 20;/ },
    ];
    const prose = readme.replace(/\s+/g, " ");
    for (const c of checks) {
      assert.ok(prose.includes(c.phrase), `README no longer says "${c.phrase}"`);
      assert.match(source(c.file), c.value, `${c.file} no longer asserts what the README says ("${c.phrase}")`);
    }
  });
});
