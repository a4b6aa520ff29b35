// Greeting (example.com/v1): spec.message → a ConfigMap holding it.
import { z } from "zod";
import { defineOperator } from "crdfn";

export const greetingSpec = z.object({
  message: z
    .string()
    .min(1)
    .max(1024)
    .describe("What the greeting says.")
    // A refinement the CRD schema cannot express: the API server accepts it, the operator does not.
    .refine((m) => m.trim() === m, { message: "message must not start or end with whitespace" }),
});

export type GreetingSpec = z.infer<typeof greetingSpec>;

/** What reconcile reports (checked before it is written, and the CRD's status schema). */
export const greetingStatus = z.object({
  phase: z.string().describe("Ready once the ConfigMap holds the message."),
});

export const configMapName = (greeting: string): string => `${greeting}-greeting`;

export default defineOperator({
  resource: {
    group: "example.com",
    version: "v1",
    plural: "greetings",
    kind: "Greeting",
    shortNames: ["greet"],
    // crdfn adds Ready, Age and (-o wide) Reason, Attempts and Next.
    printerColumns: [
      { name: "Message", type: "string", jsonPath: ".spec.message" },
      { name: "Phase", type: "string", jsonPath: ".status.phase" },
    ],
  },
  spec: greetingSpec,
  status: greetingStatus,
  owns: [{ group: "", version: "v1", kind: "ConfigMap" }],
  reconcile(greeting) {
    return {
      children: [
        {
          apiVersion: "v1",
          kind: "ConfigMap",
          metadata: { name: configMapName(greeting.metadata.name), labels: { "example.com/greeting": greeting.metadata.name } },
          data: { message: greeting.spec.message },
        },
      ],
      status: { phase: "Ready" },
    };
  },
});
