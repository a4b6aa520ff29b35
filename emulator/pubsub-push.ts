// The local push deliverer: stands in for Pub/Sub push delivery, as the SQS poller stands in
// for Lambda's event source. The emulator (pstest) never pushes, so this pulls from the
// subscription and POSTs each message to the function's HTTP endpoint (a functions-framework
// server) as push would, and turns the answer into an acknowledgement.
//
// What Pub/Sub guarantees, and what this reproduces:
//  * In order per ordering key, when the subscription enables message ordering: messages of one
//    key are delivered in the order Pub/Sub received them; keys are independent; messages
//    without a key are not ordered (docs.cloud.google.com/pubsub/docs/ordering).
//  * One message of a key at a time: the docs read here (ordering, push, the Subscription proto)
//    do not state a per-key limit for push in so many words; what they state (in-order delivery,
//    a push acknowledged only by its answer, and a redelivery of message N redelivering every
//    later message of its key) is kept, with no redelivered duplicates, by sending a key's next
//    message only once the one before it is acknowledged or dead-lettered, and that is what is
//    done here. pstest enforces it itself (it hands out a key's oldest unacknowledged message
//    only when none of the key is outstanding); the deliverer keeps a message outstanding for
//    its whole request and while it waits out its backoff, so a refused message holds its key.
//  * On a refusal (a status other than 102/200/201/202/204, no answer within the ack deadline,
//    which push uses as its request timeout, or no connection): the same message is delivered
//    again after the retry policy's backoff (exponential from minimumBackoff to maximumBackoff,
//    best effort; at once when the subscription has no policy), and only then the ones after it.
//    Pub/Sub documents that a redelivery of a message also redelivers every later message of its
//    key, even acknowledged ones; with one message in flight per key there are none to repeat.
//    After maxDeliveryAttempts the message goes to the dead-letter topic and its key moves on:
//    the emulator implements that count and the forwarding (deliveryAttempt is in each request:
//    pstest v2.6.0 counts a delivery when a pull hands the message out, so the first push carries
//    1 and the n-th n, as Pub/Sub's; the modifyAckDeadline before each POST counts nothing. Where
//    it differs: its count is kept per published message, shared by every subscription of the
//    topic, where Pub/Sub keeps one per subscription; and a message pulled but not pushed (its
//    key still in flight, below) has spent one — test/cloudrun-attempts.test.ts);
//    Pub/Sub forwards to the dead-letter topic on a best-effort basis, which it says can break
//    the redelivery rule above (ordering docs).
//  * Not reproduced: Pub/Sub's push backoff on many refusals (it slows all delivery
//    down) and its adaptive concurrency (here a fixed `maxOutstanding`), OIDC tokens, unwrapped
//    payloads.
import { v1, type PubSub, type protos } from "@google-cloud/pubsub";
import { SetupError } from "./errors.ts";
import { ACK_STATUSES, pushRequest, retryDelaySeconds, retryPolicyOf, type PushFormat } from "./pubsub-push-request.ts";

export interface PushDelivererOptions {
  /** A client of the emulator (clients/pubsub-client.ts). */
  pubsub: PubSub;
  /** Full name or id of the subscription to serve. */
  subscription: string;
  /** Where to POST; default: the subscription's pushConfig.pushEndpoint. */
  endpoint?: string;
  /** "push" (default) for an HTTP function; "cloudevent" for a CloudEvent function, as Eventarc calls it. */
  format?: PushFormat;
  /** Requests in flight at once, across keys. Default 10. */
  maxOutstanding?: number;
  log?: (line: string) => void;
  /** Told about each push request once it is answered (or fails): what `npm run bench -- --target cloudrun` counts and prices. */
  onPush?: (push: PushRecord) => void;
}

/** One push request, as Pub/Sub would bill it and Cloud Run would serve it. */
export interface PushRecord {
  /** Which delivery of its message this was (1: the first; more: a redelivery after a refusal). */
  attempt: number;
  /** The endpoint answered with an acknowledging status. */
  acked: boolean;
  /** Wall time of the HTTP request, from sending it to its answer (or failure). */
  ms: number;
  /** The message's data, attribute keys and values, and ordering key, in bytes: the part of Pub/Sub's billed size that varies. */
  bytes: number;
}

/** What of a message Pub/Sub bills by size, besides a fixed timestamp and its id (cost.ts adds those). */
function messageBytes(m: protos.google.pubsub.v1.IPubsubMessage | null | undefined): number {
  if (!m) return 0;
  const data = typeof m.data === "string" ? Buffer.byteLength(m.data, "base64") : (m.data?.length ?? 0);
  const attributes = Object.entries(m.attributes ?? {}).reduce((n, [k, v]) => n + Buffer.byteLength(k) + Buffer.byteLength(v), 0);
  return data + attributes + Buffer.byteLength(m.orderingKey ?? "");
}

export interface PushDeliverer {
  /** Requests answered with an acknowledging status, and the others (refused, failed, timed out). */
  readonly counts: { readonly acked: number; readonly refused: number };
  /** Stops pulling, lets requests in flight finish (aborting them after `graceMs`), closes the client. Idempotent. */
  stop(graceMs?: number): Promise<void>;
}

/** Time the deliverer holds a message beyond its request timeout (so the emulator never hands it out twice at once). */
const LEASE_MARGIN_SECONDS = 30;
const MAX_ACK_DEADLINE_SECONDS = 600;

/** One push request: its HTTP status, or why there is none (no answer in time, refused connection). */
async function post(
  endpoint: string,
  request: { body: string; headers: Record<string, string> },
  timeoutSeconds: number,
  stop: AbortSignal,
): Promise<number | string> {
  try {
    const signal = AbortSignal.any([stop, AbortSignal.timeout(timeoutSeconds * 1000)]);
    const res = await fetch(endpoint, { method: "POST", headers: request.headers, body: request.body, signal });
    await res.arrayBuffer().catch(() => undefined);
    return res.status;
  } catch (e) {
    return (e as Error).name === "TimeoutError" ? `no answer within ${timeoutSeconds}s` : (e as Error).message;
  }
}

/** How the subscription delivers: where, in order or not, its retry policy, and the request timeout and lease. */
async function subscriptionOf(o: PushDelivererOptions) {
  const sub = o.pubsub.subscription(o.subscription);
  const [meta] = await sub.getMetadata();
  const endpoint = o.endpoint ?? meta.pushConfig?.pushEndpoint ?? undefined;
  if (!endpoint) throw new SetupError(`push deliverer: subscription ${sub.name} has no push endpoint, and none was given`);
  // Push's request timeout is the ack deadline (Pub/Sub's default 10 s); the lease outlasts it.
  const timeoutSeconds = Math.min(meta.ackDeadlineSeconds || 10, MAX_ACK_DEADLINE_SECONDS - LEASE_MARGIN_SECONDS);
  return {
    name: sub.name,
    endpoint,
    topic: meta.topic ?? "",
    ordered: meta.enableMessageOrdering === true,
    policy: retryPolicyOf(meta),
    timeoutSeconds,
    leaseSeconds: timeoutSeconds + LEASE_MARGIN_SECONDS,
  };
}

/** Pulls while there is room, waits for room when full, and rides out an unreachable emulator, saying so once. */
async function pullLoop(d: { stopping(): boolean; full(): boolean; room(): Promise<void>; pull(): Promise<void>; log(line: string): void }): Promise<void> {
  let failing = false;
  while (!d.stopping()) {
    if (d.full()) {
      await d.room();
      continue;
    }
    try {
      await d.pull();
      if (failing) d.log("push deliverer: pulling again");
      failing = false;
    } catch (e) {
      if (d.stopping()) break;
      if (!failing) d.log(`push deliverer: pull failed (${(e as Error).message}); retrying`);
      failing = true;
      await new Promise((r) => setTimeout(r, 1000));
    }
  }
}

export async function startPushDeliverer(o: PushDelivererOptions): Promise<PushDeliverer> {
  const log = o.log ?? (() => {});
  const format = o.format ?? "push";
  const maxOutstanding = o.maxOutstanding ?? 10;
  const { name, endpoint, topic, ordered, policy, timeoutSeconds, leaseSeconds } = await subscriptionOf(o);
  // The emulator's address and plain-gRPC credentials, as the PubSub client resolved them.
  const client = new v1.SubscriberClient({ ...(await o.pubsub.getClientConfig()) });

  const counts = { acked: 0, refused: 0 };
  const busyKeys = new Set<string>();
  /** Delivery counts kept here when the emulator gives none (a subscription without dead-lettering). */
  const attempts = new Map<string, number>();
  const inFlight = new Set<Promise<void>>();
  const abort = new AbortController();
  let stopping = false;
  let wake: (() => void) | undefined;

  async function deliver(rm: protos.google.pubsub.v1.IReceivedMessage, key: string | undefined): Promise<void> {
    const ackId = rm.ackId ?? "";
    const id = rm.message?.messageId ?? "";
    try {
      await client.modifyAckDeadline({ subscription: name, ackIds: [ackId], ackDeadlineSeconds: leaseSeconds });
      const req = pushRequest(rm, name, topic, format);
      const sent = performance.now();
      const answer = await post(endpoint, req, timeoutSeconds, abort.signal);
      const acked = typeof answer === "number" && ACK_STATUSES.has(answer);
      const attempt = rm.deliveryAttempt || (attempts.get(id) ?? 0) + 1;
      o.onPush?.({ attempt, acked, ms: performance.now() - sent, bytes: messageBytes(rm.message) });
      if (acked) {
        await client.acknowledge({ subscription: name, ackIds: [ackId] });
        attempts.delete(id);
        counts.acked++;
        return;
      }
      counts.refused++;
      attempts.set(id, attempt);
      const delay = Math.ceil(retryDelaySeconds(policy, attempt));
      log(`push ${id}${key ? ` (key ${key})` : ""} attempt ${attempt}: ${answer}; again in ${delay}s`);
      // Holding the message for the backoff (rather than a nack and a timer here) keeps it, and
      // so its key, outstanding in the emulator: the next message of the key waits, as in Pub/Sub.
      await client.modifyAckDeadline({ subscription: name, ackIds: [ackId], ackDeadlineSeconds: Math.min(delay, MAX_ACK_DEADLINE_SECONDS) });
    } catch (e) {
      // The emulator is unreachable: the lease runs out and the message comes back.
      log(`push ${id}: ${(e as Error).message}`);
    }
  }

  function start(rm: protos.google.pubsub.v1.IReceivedMessage): void {
    const key = ordered && rm.message?.orderingKey ? rm.message.orderingKey : undefined;
    if (key !== undefined && busyKeys.has(key)) {
      // Only a message whose lease ran out while its request was still running comes back while
      // its key is busy (a stalled process): leave it to come back again rather than run it twice.
      log(`push ${rm.message?.messageId}: its key ${key} is still in flight; skipped`);
      return;
    }
    if (key !== undefined) busyKeys.add(key);
    const p = deliver(rm, key).finally(() => {
      if (key !== undefined) busyKeys.delete(key);
      inFlight.delete(p);
      wake?.();
      // The emulator's waiting pull is not told that the key's next message became available:
      // ask at once, so the next message follows as promptly as push sends it.
      if (!stopping) {
        const q = pull(true)
          .catch(() => undefined)
          .finally(() => pulls.delete(q));
        pulls.add(q);
      }
    });
    inFlight.add(p);
  }

  /** Messages asked for and not yet started: two pulls at once never exceed maxOutstanding. */
  let reserved = 0;
  /** The immediate pulls under way (stop waits for them and for what they start). */
  const pulls = new Set<Promise<void>>();
  async function pull(immediately: boolean): Promise<void> {
    const room = maxOutstanding - inFlight.size - reserved;
    if (room <= 0) return;
    reserved += room;
    try {
      // Without returnImmediately the emulator answers at once when it has messages, and after 0.5 s without.
      const [res] = await client.pull({ subscription: name, maxMessages: room, returnImmediately: immediately }, { timeout: 30_000 });
      reserved -= room;
      for (const rm of res.receivedMessages ?? []) start(rm);
    } catch (e) {
      reserved -= room;
      throw e;
    } finally {
      // The room this pull reserved is free again: the pull loop may be waiting for it. (An
      // immediate pull started as the last request in flight ended holds all the room while the
      // loop looks; coming back empty, it must wake the loop, or nothing is pulled again.)
      wake?.();
    }
  }

  const loop = pullLoop({
    stopping: () => stopping,
    full: () => inFlight.size + reserved >= maxOutstanding,
    room: () => new Promise<void>((r) => (wake = r)),
    pull: () => pull(false),
    log,
  });

  let stopped: Promise<void> | undefined;
  return {
    counts,
    stop: (graceMs = 10_000) =>
      (stopped ??= (async () => {
        stopping = true;
        wake?.();
        await loop;
        await Promise.allSettled([...pulls]);
        const late = setTimeout(() => abort.abort(), graceMs);
        await Promise.allSettled([...inFlight]);
        clearTimeout(late);
        await client.close();
      })()),
  };
}
