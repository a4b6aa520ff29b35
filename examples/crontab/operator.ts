// CronTab (stable.example.com/v1), the Kubernetes documentation's example resource: an owned
// batch/v1 CronJob, plus an entry in a shared "crontab-registry" ConfigMap that the finalizer
// withdraws — cleanup you can watch happen.
import { z } from "zod";
import { defineOperator } from "crdfn";

/** The pattern from the Kubernetes CRD documentation. */
export const CRON_SPEC_PATTERN = /^(\d+|\*)(\/\d+)?(\s+(\d+|\*)(\/\d+)?){4}$/;
export const REGISTRY = "crontab-registry";
export const FINALIZER = "stable.example.com/cleanup";

export const cronTabSpec = z.object({
  cronSpec: z.string().regex(CRON_SPEC_PATTERN).describe("When to run, in cron syntax."),
  image: z.string().min(1).describe("Container image to run."),
  replicas: z.number().int().min(1).max(10).default(1).describe("Pods per run (1–10)."),
});

export type CronTabSpec = z.infer<typeof cronTabSpec>;

/** What reconcile reports: the scale subresource reads replicas from here (statusReplicasPath). */
export const cronTabStatus = z.object({
  replicas: z.number().int().min(1).max(10).describe("Pods per run of the CronJob."),
});

export const cronJobName = (cronTab: string): string => `${cronTab}-cron`;

export default defineOperator({
  resource: {
    group: "stable.example.com",
    version: "v1",
    plural: "crontabs",
    kind: "CronTab",
    shortNames: ["ct"],
    categories: ["all"],
    scale: { specReplicasPath: ".spec.replicas", statusReplicasPath: ".status.replicas" },
    printerColumns: [
      { name: "Spec", type: "string", jsonPath: ".spec.cronSpec" },
      { name: "Image", type: "string", jsonPath: ".spec.image" },
      { name: "Replicas", type: "integer", jsonPath: ".spec.replicas" },
      { name: "Ready", type: "string", jsonPath: '.status.conditions[?(@.type=="Ready")].status' },
      { name: "Age", type: "date", jsonPath: ".metadata.creationTimestamp" },
    ],
  },
  spec: cronTabSpec,
  status: cronTabStatus,
  owns: [
    { group: "batch", version: "v1", kind: "CronJob" },
    // Only the shared registry (see infra/generated/functions/crontab.yaml): nothing of this kind to prune.
    { group: "", version: "v1", kind: "ConfigMap", prune: false },
  ],
  shares: [{ group: "", kind: "ConfigMap", name: REGISTRY }],
  finalizer: FINALIZER,
  reconcile(cronTab) {
    const { name } = cronTab.metadata;
    const { cronSpec, image, replicas } = cronTab.spec;
    return {
      children: [
        {
          apiVersion: "batch/v1",
          kind: "CronJob",
          metadata: { name: cronJobName(name), labels: { "stable.example.com/crontab": name } },
          spec: {
            schedule: cronSpec,
            concurrencyPolicy: "Forbid",
            jobTemplate: {
              spec: {
                parallelism: replicas,
                completions: replicas,
                template: { spec: { restartPolicy: "OnFailure", containers: [{ name: "crontab", image }] } },
              },
            },
          },
        },
      ],
      shared: [{ apiVersion: "v1", kind: "ConfigMap", metadata: { name: REGISTRY }, data: { [name]: cronSpec } }],
      status: { replicas },
    };
  },
  async finalize(cronTab, ctx) {
    await ctx.release({
      apiVersion: "v1",
      kind: "ConfigMap",
      name: REGISTRY,
      ...(cronTab.metadata.namespace ? { namespace: cronTab.metadata.namespace } : {}),
    });
    return { done: true };
  },
});
