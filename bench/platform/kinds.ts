// bench:platform's ten kinds: Greeting0…Greeting9 (bench.crdfn.dev/v1), each an operator with
// the example Greeting's pure reconcile (spec.message → one ConfigMap), defined through crdfn's
// public entry point as a platform team's ten operators would be. Each kind labels its
// ConfigMaps with a key of its own, so ten operators sharing a namespace can each cache only
// their own children, and object names carry the kind so no two kinds' children collide.
import { z } from "zod";
import { defineOperator, type Operator } from "../../core/index.ts";

export const PLATFORM_GROUP = "bench.crdfn.dev";
export const PLATFORM_VERSION = "v1";

/** One of the ten kinds as the driver, the Go operators and the API server's counters name it. */
export interface PlatformKind {
  group: string;
  version: string;
  kind: string;
  plural: string;
  /** The label key on its ConfigMaps (value: the owner's name). */
  childLabel: string;
  /** Prefix of its objects' names. */
  prefix: string;
}

export function platformKind(i: number): PlatformKind {
  return {
    group: PLATFORM_GROUP,
    version: PLATFORM_VERSION,
    kind: `Greeting${i}`,
    plural: `greeting${i}s`,
    childLabel: `${PLATFORM_GROUP}/greeting${i}`,
    prefix: `g${i}`,
  };
}

export const platformKinds = (count: number): PlatformKind[] => Array.from({ length: count }, (_, i) => platformKind(i));

/** The name of object `i` of a kind (zero-padded so a listing reads in order). */
export const platformObjectName = (k: PlatformKind, i: number): string => `${k.prefix}-${String(i).padStart(5, "0")}`;

const spec = z.object({ message: z.string().min(1).max(1024).describe("What the greeting says.") });
const status = z.object({ phase: z.string().describe("Ready once the ConfigMap holds the message.") });

/** The operator of one kind: the example Greeting's reconcile, its child labelled with the kind's key. */
export function platformOperator(k: PlatformKind): Operator<unknown> {
  return defineOperator({
    resource: { group: k.group, version: k.version, plural: k.plural, kind: k.kind },
    spec,
    status,
    owns: [{ group: "", version: "v1", kind: "ConfigMap" }],
    reconcile(object) {
      return {
        children: [
          {
            apiVersion: "v1",
            kind: "ConfigMap",
            metadata: { name: `${object.metadata.name}-greeting`, labels: { [k.childLabel]: object.metadata.name } },
            data: { message: object.spec.message },
          },
        ],
        status: { phase: "Ready" },
      };
    },
  });
}

export const platformOperators = (count: number): Array<Operator<unknown>> => platformKinds(count).map(platformOperator);
