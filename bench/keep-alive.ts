// The benchmark's own API client must not be its bottleneck. KubeConfig.applyToHTTPSOptions
// replaces the request's agent with client-node's cached https.Agent, which does not keep
// connections alive, so every request would pay a TLS handshake with a client certificate
// (the poller profile shows that cost dominating the functions' CPU). Keeping the caller's
// keep-alive agent makes the load generator cheap and the raw ceiling the API server's.
import type { RequestOptions } from "node:https";
import { KubeConfig } from "@kubernetes/client-node";

class KeepAliveKubeConfig extends KubeConfig {
  override async applyToHTTPSOptions(opts: RequestOptions): Promise<void> {
    const own = opts.agent;
    await super.applyToHTTPSOptions(opts);
    if (own !== undefined) opts.agent = own;
  }
}

/** A KubeConfig from the file whose requests keep the connection pool their caller brings. */
export function keepAliveKubeConfig(kubeconfigPath: string): KubeConfig {
  const kc = new KeepAliveKubeConfig();
  kc.loadFromFile(kubeconfigPath);
  return kc;
}
