// A kubeconfig file, read by client-node's KubeConfig (exec plugins, auth providers, client
// certificates). Import this module dynamically, only when a kubeconfig is used: it is what
// loads client-node (see kube-connection.ts for the cost).
import { KubeConfig } from "@kubernetes/client-node";

export interface LoadedKubeconfig {
  kubeConfig: KubeConfig;
  /** The file, context and credential, in words (named when the API server refuses it). */
  source: string;
}

/** `file`: default KUBECONFIG, then ~/.kube/config. `context`: default its current context. */
export function loadKubeconfig(file: string | undefined, context: string | undefined, env: NodeJS.ProcessEnv): LoadedKubeconfig {
  const kubeConfig = new KubeConfig();
  if (file !== undefined) kubeConfig.loadFromFile(file);
  else kubeConfig.loadFromDefault();
  if (context !== undefined) kubeConfig.setCurrentContext(context);
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
    source: `kubeconfig ${file ?? env.KUBECONFIG ?? "~/.kube/config"}, context ${kubeConfig.getCurrentContext()}, user ${user?.name ?? "?"} (${how})`,
  };
}
