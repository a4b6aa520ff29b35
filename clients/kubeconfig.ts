// A kubeconfig file, read by client-node's KubeConfig (exec plugins, auth providers, client
// certificates). Import this module dynamically, only when a kubeconfig is used: it is what
// loads client-node (see kube-connection.ts for the cost).
import { readFileSync } from "node:fs";
import { homedir } from "node:os";
import { delimiter, join } from "node:path";
import { KubeConfig } from "@kubernetes/client-node";
import { ConfigError } from "../core/config-error.ts";

export interface LoadedKubeconfig {
  kubeConfig: KubeConfig;
  /** The file, context and credential, in words (named when the API server refuses it). */
  source: string;
}

/** Why a file could not be read, in words (its errno code when it has none here). */
function unreadable(e: unknown): string {
  const code = (e as { code?: unknown }).code;
  if (code === "ENOENT") return "no such file";
  if (code === "EACCES" || code === "EPERM") return "cannot read it (permission denied)";
  if (code === "EISDIR") return "is a folder, not a file";
  return typeof code === "string" ? `cannot read it (${code})` : `not a kubeconfig: ${(e as Error).message.split("\n")[0]}`;
}

/**
 * Where `file` came from, for the one line that refuses it. The callers pass `--kubeconfig`'s value,
 * else the KUBECONFIG of `env` (the environment, over what `crdfn dev` wrote in .crdfn/env).
 */
function settingOf(file: string | undefined, env: NodeJS.ProcessEnv, from: string | undefined): string {
  if (from !== undefined) return from;
  if (file === undefined) return env.KUBECONFIG ? "KUBECONFIG" : "the default, ~/.kube/config";
  if (file !== env.KUBECONFIG) return "--kubeconfig";
  return process.env.KUBECONFIG === file ? "KUBECONFIG" : "KUBECONFIG in crdfn dev's env file (.crdfn/env)";
}

/** Reads one file into `into` (merged after the first, as kubectl merges KUBECONFIG's list). */
function readInto(into: KubeConfig, path: string, first: boolean, setting: string): void {
  let text: string;
  try {
    text = readFileSync(path, "utf8");
  } catch (e) {
    throw new ConfigError(`kubeconfig ${path} (from ${setting}): ${unreadable(e)}`);
  }
  const target = first ? into : new KubeConfig();
  try {
    target.loadFromString(text);
  } catch (e) {
    throw new ConfigError(`kubeconfig ${path} (from ${setting}): not a kubeconfig: ${(e as Error).message.split("\n")[0]}`);
  }
  target.makePathsAbsolute(join(path, ".."));
  if (!first) into.mergeConfig(target);
}

/**
 * `file`: default KUBECONFIG (of `env`), then ~/.kube/config, then a pod's own ServiceAccount.
 * `context`: default its current context. `from` names the setting `file` came from when the
 * caller knows it better than this can tell (a missing or unreadable file is one line naming both).
 */
export function loadKubeconfig(file: string | undefined, context: string | undefined, env: NodeJS.ProcessEnv, from?: string): LoadedKubeconfig {
  const kubeConfig = new KubeConfig();
  const setting = settingOf(file, env, from);
  // KUBECONFIG is a list, as kubectl reads it; --kubeconfig is one file.
  const files = file !== undefined && file !== env.KUBECONFIG ? [file] : (env.KUBECONFIG ?? "").split(delimiter).filter(Boolean);
  if (files.length === 0) {
    const home = join(homedir(), ".kube", "config");
    try {
      readInto(kubeConfig, home, true, setting);
    } catch (e) {
      if (env.KUBERNETES_SERVICE_HOST === undefined) throw e;
      kubeConfig.loadFromCluster();
    }
  } else {
    files.forEach((f, i) => readInto(kubeConfig, f, i === 0, setting));
  }
  const shown = file ?? env.KUBECONFIG ?? "~/.kube/config";
  if (context !== undefined) {
    if (kubeConfig.getContextObject(context) === null)
      throw new ConfigError(
        `--context ${context}: kubeconfig ${shown} (from ${setting}) has no such context (its contexts: ${kubeConfig.contexts.map((c) => c.name).join(", ") || "none"})`,
      );
    kubeConfig.setCurrentContext(context);
  }
  const user = kubeConfig.getCurrentUser();
  const how = user?.exec
    ? `exec plugin ${String((user.exec as { command?: unknown }).command)}`
    : user?.token
      ? "its token"
      : user?.certFile || user?.certData
        ? "its client certificate"
        : "its user";
  return {
    kubeConfig,
    source: `kubeconfig ${shown}, context ${kubeConfig.getCurrentContext()}, user ${user?.name ?? "?"} (${how})`,
  };
}
