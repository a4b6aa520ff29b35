// The tests' event keys. TEST_EVENT_KEY is the cluster's key: the bridges a test starts hold it
// and sign each event with its operator's key, derived from it (core/event-auth.ts operatorKey);
// a function verifies with its operator's key, as a deployed bridge and its functions do
// (docs/security.md). Fixed, so a process a test spawns and the test itself agree without
// passing it around.
import { formatEventKey, operatorKey, operatorResource, parseEventKey, signKeyEvent, type EventKey, type EventKeyring } from "../../core/event-auth.ts";
import type { KeyEvent } from "../../core/event.ts";

/** The test cluster's key (the bridge's CRDFN_EVENT_KEY). */
export const TEST_EVENT_KEY = parseEventKey(`test:${Buffer.alloc(32, 7).toString("base64")}`);

type Resource = { group: string; plural: string };
const nameOf = (r: Resource | string): string => (typeof r === "string" ? r : operatorResource(r));

/** An operator's key under the test cluster's key (or `clusterKey`): what its function holds. */
export const testOperatorKey = (resource: Resource | string, clusterKey: EventKey = TEST_EVENT_KEY): EventKey => operatorKey(clusterKey, nameOf(resource));

/** What an operator's function accepts: its operator's key alone. */
export const testKeyring = (resource: Resource | string, clusterKey: EventKey = TEST_EVENT_KEY): EventKeyring => {
  const key = testOperatorKey(resource, clusterKey);
  return new Map([[key.kid, key.secret]]);
};

/** createRuntime's key settings for an operator of the test cluster `cluster`. */
export const testRuntimeKeys = (operator: { resource: Resource }, cluster: string): { cluster: string; eventKeys: EventKeyring } => ({
  cluster,
  eventKeys: testKeyring(operator.resource),
});

/** A function's CRDFN_EVENT_KEYS for these operators: one item per operator, named by its resource. */
export const testFunctionKeys = (...resources: Array<Resource | string>): string =>
  resources.map((r) => `${nameOf(r)}:${formatEventKey(testOperatorKey(r))}`).join(",");

/**
 * The operators whose functions the tests build from an environment (cluster.env): a function
 * built so for another fails to start with "no key for operator …". Add a test operator's
 * resource here, or give its function testFunctionKeys(resource).
 */
export const TEST_RESOURCES = [
  "alphas.alpha.devprojects.crdfn.test",
  "apps.contract.example.com",
  "authorizedkeys.keys.example.com",
  "bundles.contract.example.com",
  "clusterthings.test.crdfn.dev",
  "crontabs.stable.example.com",
  "fairtickers.test.crdfn.dev",
  "fleets.startwork.example.com",
  "gizmos.versions.example.com",
  "greetings.example.com",
  "misfits.contract.example.com",
  "notes.notes.example.com",
  "queues.queues.example.com",
  "secretreports.refs.example.com",
  "tickers.test.crdfn.dev",
  "vaults.vault.example.com",
  "widgets.admission.example.com",
  "widgets.late.example.com",
  "widgets.shop.example.com",
];

/** The settings of both sides: the bridge's CRDFN_EVENT_KEY (the cluster's), the functions' CRDFN_EVENT_KEYS (each test operator's, their one cluster). */
export const TEST_EVENT_KEY_ENV = { CRDFN_EVENT_KEY: formatEventKey(TEST_EVENT_KEY), CRDFN_EVENT_KEYS: testFunctionKeys(...TEST_RESOURCES) } as const;

/** An event as the test's bridge would sign it: with the key of its operator (hand-made ones too: the runtime checks the schema). */
export const signedForTest = (event: KeyEvent | Record<string, unknown>, clusterKey: EventKey = TEST_EVENT_KEY): KeyEvent =>
  signKeyEvent(event as KeyEvent, testOperatorKey(event as Resource, clusterKey));
