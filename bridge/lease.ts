// Leader election on a coordination.k8s.io/v1 Lease, as client-go does it (client-node has
// none). Expiry is judged by when *this* replica last saw the Lease change, never by comparing
// the holder's renewTime with our clock, so clock skew between nodes cannot cause two leaders.
// Writes carry the Lease's resourceVersion: of two candidates, only one replace succeeds.
// A leader renews by writing over the Lease as it last wrote it, without reading it first (as
// client-go's fast path does): one request per renewal instead of two. Should anyone else have
// written it since, the resourceVersion no longer matches and the renewal reads it as a
// standby would.
import { setTimeout as delay } from "node:timers/promises";
import type { Logger } from "pino";
import { ApiError, type KubeHttp } from "../clients/kube-http.ts";
import { microTime } from "../clients/micro-time.ts";
import { resourcePath } from "../core/resource-path.ts";

export interface LeaderElectionOptions {
  http: KubeHttp;
  namespace: string;
  name: string;
  identity: string;
  durationSeconds: number;
  logger: Logger;
  now: () => Date;
  onStartedLeading: () => void;
  onStoppedLeading: () => void;
}

const statusOf = (e: unknown): number | undefined => (e instanceof ApiError ? e.code : undefined);

/** The fields of a coordination.k8s.io/v1 Lease an election reads and writes. */
interface Lease {
  apiVersion?: string;
  kind?: string;
  metadata?: { name?: string; namespace?: string; resourceVersion?: string; [field: string]: unknown };
  spec?: {
    holderIdentity?: string;
    leaseDurationSeconds?: number;
    acquireTime?: string;
    renewTime?: string;
    leaseTransitions?: number;
    [field: string]: unknown;
  };
}

/** The Lease API, as the few calls an election makes. */
function leases(http: KubeHttp, namespace: string, name: string) {
  const collection = { group: "coordination.k8s.io", version: "v1", plural: "leases", namespace };
  const path = resourcePath({ ...collection, name });
  return {
    read: async () => (await http.json("GET", path)) as Lease,
    create: async (lease: Lease) => (await http.json("POST", resourcePath(collection), { body: lease })) as Lease,
    replace: async (lease: Lease) => (await http.json("PUT", path, { body: lease })) as Lease,
  };
}

export class LeaderElector {
  readonly #options: LeaderElectionOptions;
  readonly #lease: ReturnType<typeof leases>;
  #leader = false;
  #lastRenew = 0;
  #observedRv = "";
  #observedAt = 0;
  /** The Lease as this replica last wrote it while leading: what a renewal writes over. */
  #written: Lease | undefined;

  constructor(options: LeaderElectionOptions) {
    this.#options = options;
    this.#lease = leases(options.http, options.namespace, options.name);
  }

  get isLeader(): boolean {
    return this.#leader;
  }

  /** Campaigns and renews until `signal` aborts. Never throws. */
  async run(signal: AbortSignal): Promise<void> {
    const retryMs = (this.#options.durationSeconds * 1000) / 5;
    const renewDeadlineMs = this.#options.durationSeconds * 700;
    while (!signal.aborted) {
      // A hung request must not keep a leader that cannot renew from standing down in time.
      let timer: NodeJS.Timeout | undefined;
      const deadline = new Promise<boolean>((_, reject) => (timer = setTimeout(() => reject(new Error("lease request timed out")), retryMs)));
      const ok = await Promise.race([this.#tryAcquireOrRenew(), deadline])
        .finally(() => clearTimeout(timer))
        .catch((e: unknown) => {
          this.#options.logger.warn({ err: (e as Error).message }, "lease update failed");
          return false;
        });
      const now = this.#options.now().getTime();
      if (ok) this.#lastRenew = now;
      if (ok && !this.#leader && !signal.aborted) {
        this.#leader = true;
        this.#options.logger.info({ lease: this.#options.name, identity: this.#options.identity }, "acquired the lease; publishing");
        this.#options.onStartedLeading();
      } else if (!ok && this.#leader && now - this.#lastRenew > renewDeadlineMs) {
        this.#stepDown("could not renew the lease in time; standing by");
      }
      // Leaders renew a little faster than standbys retry, so a healthy leader is never raced.
      await delay(this.#leader ? retryMs : retryMs * (1 + Math.random() * 0.2), undefined, { signal }).catch(() => undefined); // an abort ends the wait
    }
  }

  /** Gives the Lease up at once so a standby need not wait for it to expire. */
  async release(): Promise<void> {
    if (!this.#leader) return;
    this.#stepDown("released the lease");
    try {
      const lease = await this.#lease.read();
      if (lease.spec?.holderIdentity !== this.#options.identity) return;
      const now = microTime(this.#options.now());
      lease.spec = { ...lease.spec, holderIdentity: "", leaseDurationSeconds: 1, renewTime: now, acquireTime: now };
      await this.#lease.replace(lease);
    } catch (e) {
      this.#options.logger.warn({ err: (e as Error).message }, "could not release the lease; it will expire");
    }
  }

  #stepDown(message: string): void {
    if (!this.#leader) return;
    this.#leader = false;
    this.#options.logger.warn({ lease: this.#options.name }, message);
    this.#options.onStoppedLeading();
  }

  async #tryAcquireOrRenew(): Promise<boolean> {
    const { namespace, name, identity, durationSeconds } = this.#options;
    const now = this.#options.now();
    const micro = microTime(now);
    const written = this.#written;
    this.#written = undefined;
    if (this.#leader && written?.spec !== undefined && this.#observedAt + durationSeconds * 1000 > now.getTime()) {
      try {
        this.#wrote(await this.#lease.replace({ ...written, spec: { ...written.spec, renewTime: micro } }), now);
        return true;
      } catch (e) {
        // A conflict (someone else wrote the Lease) or an outage: the full read-then-write decides.
        this.#options.logger.debug({ err: (e as Error).message }, "lease renewal without a read failed; reading the lease");
      }
    }
    let lease: Lease;
    try {
      lease = await this.#lease.read();
    } catch (e) {
      if (statusOf(e) !== 404) throw e;
      try {
        const created = await this.#lease.create({
          apiVersion: "coordination.k8s.io/v1",
          kind: "Lease",
          metadata: { name, namespace },
          spec: { holderIdentity: identity, leaseDurationSeconds: durationSeconds, acquireTime: micro, renewTime: micro, leaseTransitions: 0 },
        });
        this.#wrote(created, now);
        return true;
      } catch (e2) {
        if (statusOf(e2) === 409) return false;
        throw e2;
      }
    }
    const rv = lease.metadata?.resourceVersion ?? "";
    if (rv !== this.#observedRv) {
      this.#observedRv = rv;
      this.#observedAt = now.getTime();
    }
    const spec = lease.spec ?? {};
    const holder = spec.holderIdentity ?? "";
    const held = holder !== "" && holder !== identity;
    if (held && this.#observedAt + (spec.leaseDurationSeconds ?? durationSeconds) * 1000 > now.getTime()) return false;
    const mine = holder === identity;
    lease.spec = {
      ...spec,
      holderIdentity: identity,
      leaseDurationSeconds: durationSeconds,
      acquireTime: mine ? spec.acquireTime : micro,
      renewTime: micro,
      leaseTransitions: (spec.leaseTransitions ?? 0) + (mine ? 0 : 1),
    };
    try {
      this.#wrote(await this.#lease.replace(lease), now);
      if (!mine) this.#options.logger.info({ previous: holder || null }, "took over the lease");
      return true;
    } catch (e) {
      if (statusOf(e) === 409) return false;
      throw e;
    }
  }

  #wrote(lease: Lease, at: Date): void {
    this.#observedRv = lease.metadata?.resourceVersion ?? "";
    this.#observedAt = at.getTime();
    this.#written = lease;
  }
}
