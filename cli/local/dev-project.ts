// The project `crdfn dev` runs as: it names the dev bridge's identity (crdfn-bridge-<project>), so
// two projects in dev on one cluster keep each its own ServiceAccount, Roles and RoleBindings, as
// their deployments do. The same name `crdfn generate` uses when there is one to find.
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { parse as parseYaml } from "yaml";
import { SetupError } from "../../emulator/errors.ts";

const DNS_LABEL = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;
const MAX = 40;

/** A package name (`@scope/my_pkg`) as a DNS label (`my-pkg`), or undefined when nothing usable is left. */
export function projectFromPackageName(name: string): string | undefined {
  const bare = name
    .replace(/^@[^/]+\//, "")
    .toLowerCase()
    .replace(/[^a-z0-9-]+/g, "-")
    .replace(/^-+|-+$/g, "")
    .slice(0, MAX)
    .replace(/-+$/, "");
  return DNS_LABEL.test(bare) ? bare : undefined;
}

/**
 * The dev project's name: `--project`, else crdfn.deploy.yaml's `project:` (what `crdfn generate`
 * names the deployed bridge by), else package.json's name, else "dev". Each from the folder dev
 * runs in.
 */
export function devProject(cwd: string, flag?: string): { project: string; from: string } {
  if (flag !== undefined) {
    if (!DNS_LABEL.test(flag) || flag.length > MAX)
      throw new SetupError(
        `--project ${flag}: must be a lower-case DNS label of at most ${MAX} characters (it names the bridge's identity crdfn-bridge-<project>)`,
      );
    return { project: flag, from: "--project" };
  }
  const settings = join(cwd, "crdfn.deploy.yaml");
  if (existsSync(settings)) {
    let raw: unknown;
    try {
      raw = parseYaml(readFileSync(settings, "utf8"));
    } catch (e) {
      throw new SetupError(`crdfn.deploy.yaml: not YAML: ${(e as Error).message.split("\n")[0]}`);
    }
    const project = (raw as { project?: unknown } | null)?.project;
    if (typeof project === "string" && project !== "") {
      if (!DNS_LABEL.test(project) || project.length > MAX)
        throw new SetupError(`crdfn.deploy.yaml: project ${project}: must be a lower-case DNS label of at most ${MAX} characters`);
      return { project, from: "crdfn.deploy.yaml" };
    }
  }
  const pkg = join(cwd, "package.json");
  if (existsSync(pkg)) {
    try {
      const name = (JSON.parse(readFileSync(pkg, "utf8")) as { name?: unknown }).name;
      const project = typeof name === "string" ? projectFromPackageName(name) : undefined;
      if (project) return { project, from: "package.json" };
    } catch {
      // Not ours to judge here: npm says what is wrong with it.
    }
  }
  return { project: "dev", from: "default" };
}
