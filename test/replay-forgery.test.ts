// A forged dead letter through `crdfn replay --dead-letter <id> --apply`, run as a person runs it
// (its own process, their kubeconfig: the admin's here): whoever may send to the dead-letter queue
// chooses the object a letter names, so a letter not proven to come from the bridge — valid JSON
// naming a real object, with a MAC made with another key, with none, with another operator's key
// (what a leak of that operator's function gives), or signed but for another cluster — is
// refused with one line and exit 2, and nothing is written: a watch of the namespace's ConfigMaps
// records no write, the object's resourceVersion is unchanged, and the letter stays in the
// dead-letter queue. The bridge's own letter is replayed (the control: the watch sees its
// writes), and `--unverified` replays a forged one when the person says so.
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { SendMessageCommand } from "@aws-sdk/client-sqs";
import { Watch } from "@kubernetes/client-node";
import { formatEventKey, signKeyEvent } from "../core/event-auth.ts";
import { messageGroupId, type KeyEvent } from "../core/event.ts";
import type { Operator } from "../core/operator.ts";
import greeting, { configMapName } from "../examples/greeting/operator.ts";
import { packageRoot } from "../emulator/paths.ts";
import { signedForTest, TEST_EVENT_KEY, testOperatorKey } from "./support/event-key.ts";
import { CLUSTER, crApi, keyEventOf, receiveAll, startEnv, waitFor, type Env } from "./support/functions-environment.ts";
import { runCrdfn, type CliResult } from "./support/crdfn-cli.ts";

const operatorFile = join(packageRoot, "examples", "greeting", "operator.ts");
const op = greeting as Operator<unknown>;

describe("crdfn replay --dead-letter --apply refuses a dead letter not proven to come from the bridge", { timeout: 300_000 }, () => {
  let env: Env;
  let state: string;
  /** Every ConfigMap write the watch saw in the namespace, in order: name and type. */
  const writes: string[] = [];
  let stopWatch: (() => void) | undefined;
  const crdfn = (args: string[], extra: NodeJS.ProcessEnv = {}): Promise<CliResult> =>
    runCrdfn(args, {
      cwd: packageRoot,
      env: { PATH: process.env.PATH, HOME: process.env.HOME, ...env.cluster.env, CRDFN_CLUSTER: CLUSTER, LOG_LEVEL: "error", ...extra },
    });
  const deadLetter = async (event: KeyEvent | Record<string, unknown>, dedup: string): Promise<string> => {
    const sent = await env.sqs.send(
      new SendMessageCommand({
        QueueUrl: env.cluster.sqs.queues.fifoDlq,
        MessageBody: JSON.stringify(event),
        MessageGroupId: messageGroupId(event as KeyEvent),
        MessageDeduplicationId: dedup.replace(/[^A-Za-z0-9]/g, "-"),
      }),
    );
    return sent.MessageId!;
  };
  const crs = () => crApi(env, op);

  before(async () => {
    // No function and no bridge: whatever a replay writes, only the replay wrote.
    env = await startEnv([op], { file: import.meta.filename });
    state = mkdtempSync(join(tmpdir(), "crdfn-replay-forgery-"));
    // From the list's resourceVersion on, reopened where it left off if the server ends it: every write, once.
    let rv = (await env.core.listNamespacedConfigMap({ namespace: env.cluster.namespace })).metadata?.resourceVersion;
    let stopped = false;
    let abort: (() => void) | undefined;
    const open = async (): Promise<void> => {
      const request = await new Watch(env.cluster.kubeConfig).watch(
        `/api/v1/namespaces/${env.cluster.namespace}/configmaps`,
        { resourceVersion: rv, allowWatchBookmarks: true },
        (type: string, obj: { metadata?: { name?: string; resourceVersion?: string } }) => {
          if (obj.metadata?.resourceVersion) rv = obj.metadata.resourceVersion;
          if (type !== "BOOKMARK") writes.push(`${type} ${obj.metadata?.name ?? ""}`);
        },
        () => {
          if (!stopped) void open();
        },
      );
      abort = () => request.abort();
    };
    await open();
    stopWatch = () => {
      stopped = true;
      abort?.();
    };
  });
  after(async () => {
    stopWatch?.();
    await env?.cluster.stop();
    if (state) rmSync(state, { recursive: true, force: true });
  });

  it("refuses each forgery with one line and exit 2, writes nothing, and keeps the letter; replays the bridge's own; --unverified replays a forgery", async () => {
    await crs().create("victim", { message: "hello" });
    await crs().create("control", { message: "hello" });
    const victim = (await crs().get("victim"))!;
    const genuine = signedForTest(keyEventOf(op, victim));
    const { kid: _kid, mac: _mac, ...unsigned } = genuine;
    const forgeries: Array<[string, KeyEvent | Record<string, unknown>, RegExp]> = [
      ["a MAC with another key", signKeyEvent(unsigned, { kid: TEST_EVENT_KEY.kid, secret: Buffer.alloc(32, 0x66) }), /MAC does not verify \(key id "test"\)/],
      ["no MAC", { ...unsigned, v: 2 }, /MAC does not verify: the event carries none/],
      ["another operator's key", signKeyEvent(unsigned, testOperatorKey("crontabs.stable.example.com")), /MAC does not verify \(key id "test"\)/],
      ["signed, for another cluster", signedForTest({ ...unsigned, cluster: "prod" }), /it names cluster "prod", not "test"/],
    ];
    const ids: string[] = [];
    for (const [what, letter, why] of forgeries) {
      const id = await deadLetter(letter, `forged ${what}`);
      ids.push(id);
      const r = await crdfn(["replay", "--dead-letter", id, "--operator", operatorFile, "--apply"]);
      assert.equal(r.code, 2, `${what}: ${r.stdout}\n${r.stderr}`);
      const lines = r.stderr.trim().split("\n");
      assert.equal(lines.length, 1, `${what}: one line:\n${r.stderr}`);
      assert.match(lines[0]!, new RegExp(`^crdfn: --dead-letter ${id}: refused: not proven to come from the bridge \\(.*\\); nothing written`), what);
      assert.match(lines[0]!, why, what);
      assert.doesNotMatch(r.stdout, /written:|reconcile was given/, `${what}: nothing was reconciled`);
      await waitFor(`${what}: the letter visible again`, async () => (await receiveAll(env, env.cluster.sqs.queues.fifoDlq, 0)).length >= ids.length, 30_000);
    }
    // A dry run still shows a forgery, and says it is not verified; it writes nothing either.
    const dry = await crdfn(["replay", "--dead-letter", ids[0]!, "--operator", operatorFile]);
    assert.match(dry.stderr, new RegExp(`dead letter ${ids[0]} is NOT verified \\(MAC does not verify .*\\): a dry run only`), dry.stderr);
    assert.match(dry.stdout, /would write \(dry run/, dry.stdout);

    // The control: the bridge's own letter for another object, its MAC checked with the cluster
    // key `crdfn dev` keeps in its state directory (no key in the environment), is replayed.
    writeFileSync(join(state, "event-key"), `${formatEventKey(TEST_EVENT_KEY)}\n`, { mode: 0o600 });
    const control = await deadLetter(signedForTest(keyEventOf(op, (await crs().get("control"))!)), "genuine control");
    const applied = await crdfn(["replay", "--dead-letter", control, "--operator", operatorFile, "--apply", "--state-dir", state, "--cluster", CLUSTER], {
      CRDFN_EVENT_KEYS: "",
      CRDFN_EVENT_KEY: "",
    });
    assert.equal(applied.code, 0, `${applied.stdout}\n${applied.stderr}`);
    assert.match(applied.stdout, new RegExp(`dead letter ${control}: verified: its MAC verifies \\(key id "test", from ${state}/event-key\\), cluster "test"`));
    const names = async () => (await env.core.listNamespacedConfigMap({ namespace: env.cluster.namespace })).items.map((c) => c.metadata?.name);
    await waitFor("the watch sees the control's ConfigMap written", () => writes.includes(`ADDED ${configMapName("control")}`), 30_000).catch(
      async (e: Error) => {
        throw new Error(`${e.message}: the watch saw [${writes.join(", ")}]; the namespace has [${(await names()).join(", ")}]\n${applied.stdout}`);
      },
    );
    // The watch delivers in the order of writes: everything before the control's was a forgery's.
    assert.deepEqual(writes.slice(0, writes.indexOf(`ADDED ${configMapName("control")}`)), [], "no forgery wrote a ConfigMap");
    const after = (await crs().get("victim"))!;
    assert.equal(after.metadata?.resourceVersion, victim.metadata?.resourceVersion, "the victim is as it was: no status, no finalizer written");
    assert.equal(after.status, undefined);
    const left = await receiveAll(env, env.cluster.sqs.queues.fifoDlq, 0);
    assert.deepEqual(left.map((m) => m.MessageId).sort(), [...ids].sort(), "the forged letters stay in the dead-letter queue; the control's is removed");

    // Told explicitly, a person may replay an unverified letter.
    const told = await crdfn(["replay", "--dead-letter", ids[0]!, "--operator", operatorFile, "--apply", "--unverified"]);
    assert.equal(told.code, 0, `${told.stdout}\n${told.stderr}`);
    assert.match(told.stderr, /is NOT verified .*: replayed, as --unverified says/);
    await waitFor("the victim's ConfigMap written on --unverified", () => writes.includes(`ADDED ${configMapName("victim")}`), 30_000);
  });

  it("a verified dead letter of an earlier incarnation (the object deleted and re-created since) replays nothing, and --apply removes it", async () => {
    const earlier = (await crs().create("reborn", { message: "first" })) as Parameters<typeof keyEventOf>[1];
    const letter = signedForTest(keyEventOf(op, earlier));
    await crs().delete("reborn");
    await waitFor("reborn gone", async () => (await crs().get("reborn")) === undefined);
    await crs().create("reborn", { message: "second" });
    const live = (await crs().get("reborn"))!;
    const id = await deadLetter(letter, "earlier incarnation");
    const mark = writes.length;
    const r = await crdfn(["replay", "--dead-letter", id, "--operator", operatorFile, "--apply"], {
      CRDFN_EVENT_KEYS: formatEventKey(testOperatorKey(op.resource)),
    });
    assert.equal(r.code, 0, `${r.stdout}\n${r.stderr}`);
    assert.match(
      r.stdout,
      new RegExp(
        `outcome: success \\(the letter is for uid ${earlier.metadata?.uid}, an earlier object of this name; the live one is uid ${live.metadata?.uid}: nothing to replay\\)`,
      ),
    );
    assert.match(r.stdout, new RegExp(`dead letter ${id} removed: its object is gone \\(deleted and re-created since\\)`));
    assert.deepEqual(writes.slice(mark), [], "nothing written");
    assert.equal((await crs().get("reborn"))?.metadata?.resourceVersion, live.metadata?.resourceVersion, "the live object as it was");
  });
});
