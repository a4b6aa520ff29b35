// Cutting a client off from the API server and restoring it.
import { connect, createServer, type AddressInfo, type Server, type Socket } from "node:net";
import { KubeConfig } from "@kubernetes/client-node";

/** A TCP relay in front of the API server that a test can cut and restore: the bridge "goes away". */
export class Relay {
  readonly #target: number;
  readonly #sockets = new Set<Socket>();
  #server: Server | undefined;
  port = 0;
  constructor(targetPort: number) {
    this.#target = targetPort;
  }
  async open(): Promise<void> {
    const server = createServer((down) => {
      const up = connect(this.#target, "127.0.0.1");
      for (const s of [down, up]) {
        this.#sockets.add(s);
        s.on("close", () => this.#sockets.delete(s));
        s.on("error", () => (down.destroy(), up.destroy()));
      }
      down.pipe(up);
      up.pipe(down);
    });
    await new Promise<void>((resolve) => server.listen(this.port, "127.0.0.1", resolve));
    this.port = (server.address() as AddressInfo).port;
    this.#server = server;
  }
  async cut(): Promise<void> {
    const server = this.#server;
    this.#server = undefined;
    for (const s of this.#sockets) s.destroy();
    if (server !== undefined) await new Promise((resolve) => server.close(resolve));
  }
}

/** The same identity as `kc`, reaching the API server through another port. */
export function kubeConfigVia(kc: KubeConfig, port: number): KubeConfig {
  const copy = new KubeConfig();
  copy.loadFromOptions({
    clusters: kc.clusters.map((c) => ({ ...c, server: `https://127.0.0.1:${port}` })),
    users: kc.users,
    contexts: kc.contexts,
    currentContext: kc.currentContext,
  });
  return copy;
}
