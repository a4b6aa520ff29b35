// The tests' event key: the bridges a test starts sign with it and the functions verify with it,
// as a deployed bridge and its functions share their cluster's key (docs/security.md). Fixed, so a
// process a test spawns and the test itself agree without passing it around.
import { formatEventKey, parseEventKey, signKeyEvent, type EventKeyring } from "../../core/event-auth.ts";
import type { KeyEvent } from "../../core/event.ts";

export const TEST_EVENT_KEY = parseEventKey(`test:${Buffer.alloc(32, 7).toString("base64")}`);
/** What the functions accept: the test key alone. */
export const TEST_EVENT_KEYS: EventKeyring = new Map([[TEST_EVENT_KEY.kid, TEST_EVENT_KEY.secret]]);
/** The settings of both sides: the bridge's CRDFN_EVENT_KEY, the functions' CRDFN_EVENT_KEYS (their one cluster). */
export const TEST_EVENT_KEY_ENV = { CRDFN_EVENT_KEY: formatEventKey(TEST_EVENT_KEY), CRDFN_EVENT_KEYS: formatEventKey(TEST_EVENT_KEY) } as const;

/** An event as the test's bridge would sign it (hand-made ones too: the runtime checks the schema). */
export const signedForTest = (event: KeyEvent | Record<string, unknown>): KeyEvent => signKeyEvent(event as KeyEvent, TEST_EVENT_KEY);
