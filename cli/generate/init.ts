// `crdfn init [dir]`: a new operator project the user owns (files from init-templates.ts).
import { existsSync, mkdirSync, readdirSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { basename, join, relative, resolve, sep } from "node:path";
import { Command } from "commander";
import { SetupError } from "../../emulator/errors.ts";
import { packageRoot, packageVersion } from "../../emulator/paths.ts";
import { projectFiles, projectNames, type ProjectVersions } from "./init-templates.ts";

const DNS_LABEL = /^[a-z]([-a-z0-9]*[a-z0-9])?$/;

/** Why a name cannot name a project (its npm package, folder and resource kind), or undefined. */
export function nameProblem(name: string, taken: string[]): string | undefined {
  if (name.length > 63 || !DNS_LABEL.test(name)) {
    return `"${name}" is not a valid name: it names the npm package and the resource kind, so it must be a DNS-1123 label (at most 63 lower-case letters, digits and '-', starting with a letter, ending with a letter or digit)`;
  }
  if (taken.includes(name))
    return `"${name}" is not a valid name: npm cannot install a package that depends on its own name, and the project depends on ${taken.join(", ")}`;
  return undefined;
}

/**
 * The new project's dependency versions: crdfn's own, so a project starts on what it was made with.
 * `project`: the project's folder, which a local crdfn's path is written relative to (default `cwd`).
 */
export function projectVersions(crdfn: string | undefined, cwd: string, project = cwd): ProjectVersions {
  const manifest = JSON.parse(readFileSync(join(packageRoot, "package.json"), "utf8")) as {
    dependencies: Record<string, string>;
    peerDependencies: Record<string, string>;
    devDependencies?: Record<string, string>;
  };
  return {
    crdfn: dependencySpec(crdfn ?? `^${packageVersion}`, cwd, project),
    zod: manifest.peerDependencies.zod!,
    typescript: manifest.devDependencies?.typescript ?? "^6.0.0",
    typesNode: "^22.18.0",
    serverless: manifest.devDependencies?.serverless ?? "3.40.0",
    serverlessEsbuild: manifest.devDependencies?.["serverless-esbuild"] ?? "^1.57.2",
    functionsFramework: manifest.dependencies["@google-cloud/functions-framework"]!,
  };
}

/**
 * A local tarball or folder given on the command line (relative to `cwd`) becomes a file: spec
 * relative to the project, as `npm install <path>` writes one: the project and the tarball can be
 * moved (or committed) together, where an absolute path ties the project to one machine's folder.
 */
function dependencySpec(spec: string, cwd: string, project: string): string {
  const local = spec.startsWith("file:") ? spec.slice(5) : spec;
  const looksLocal = spec.startsWith("file:") || /^\.{0,2}[\\/]/.test(spec) || spec.endsWith(".tgz");
  if (!looksLocal || !existsSync(resolve(cwd, local))) return spec;
  const path = relative(project, resolve(cwd, local)).split(sep).join("/");
  return `file:${path.startsWith(".") ? path : `./${path}`}`;
}

export interface InitResult {
  dir: string;
  files: string[];
}

export function initProject(dir: string, o: { crdfn?: string; cwd: string }): InitResult {
  const target = resolve(o.cwd, dir);
  const name = basename(target);
  const versions = projectVersions(o.crdfn, o.cwd, target);
  const problem = nameProblem(name, ["crdfn", "zod", "typescript"]);
  if (problem) throw new SetupError(`init: ${problem}`);
  if (existsSync(target) && (!statSync(target).isDirectory() || readdirSync(target).length > 0)) {
    throw new SetupError(`init: ${dir} already exists and is not empty; name a new folder, e.g. crdfn init my-operator`);
  }
  mkdirSync(target, { recursive: true });
  const files = projectFiles(projectNames(name), versions);
  for (const [path, text] of files) writeFileSync(join(target, path), text);
  return { dir: target, files: [...files.keys()] };
}

export function initCommand(): Command {
  return new Command("init")
    .description(
      "make a new operator project in <dir> (default: the current folder, if empty): operator.ts, a sample object, a unit test, " +
        "its Lambda and Cloud Run entries, deploy settings, serverless.yml, package.json",
    )
    .argument("[dir]", "the new project's folder; its name names the package and the resource kind", ".")
    .option("--crdfn <spec>", "the project's crdfn dependency: a version range, a tarball or a folder", `^${packageVersion}`)
    .addHelpText(
      "after",
      "\nExamples:\n  $ npx crdfn init motd                 # ./motd: kind Motd, package motd\n" +
        "  $ mkdir my-app && cd my-app && npx crdfn init\n" +
        "  $ crdfn init demo --crdfn ../crdfn-0.1.0.tgz   # depend on a local build of crdfn",
    )
    .action((dir: string, o: { crdfn: string }) => {
      const made = initProject(dir, { crdfn: o.crdfn, cwd: process.cwd() });
      const { kind } = projectNames(basename(made.dir));
      const where = relative(process.cwd(), made.dir) || ".";
      console.log(`created ${where}/ (a ${kind} operator): ${made.files.join(", ")}`);
      console.log("next:");
      if (where !== ".") console.log(`  cd ${where}`);
      console.log(
        "  npm install\n  npm test          # the reconcile unit test\n  npm run dev       # run it against a local control plane, with sample.yaml applied\n" +
          "  npm run generate  # its deploy files, once crdfn.deploy.yaml names what crdfn cannot know",
      );
    });
}
