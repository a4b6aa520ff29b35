import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { z } from "zod";
import { ConfigError } from "../core/config-error.ts";
import { parseDeploySettings, type CloudRunDeploySettings } from "./settings.ts";
import { gcpNamesOf, sourceDirFromTerraform } from "./gcp.ts";
import { defineOperator, type Operator } from "../core/operator.ts";

const known = {
  project: "shop",
  target: "cloudrun",
  cluster: "prod",
  namespaces: ["shop"],
  bridge: { image: "registry.example.com/bridge:1" },
  gcp: { project: "my-project", region: "europe-west1", gkeCluster: "prod" },
};
const settingsOf = (extra: Record<string, unknown> = {}) => parseDeploySettings({ ...known, ...extra }, "test") as CloudRunDeploySettings;
const op = (kind: string) =>
  defineOperator({
    resource: { group: "example.com", version: "v1", plural: `${kind.toLowerCase()}s`, kind },
    spec: z.object({}),
    reconcile: () => ({}),
  }) as Operator<unknown>;

describe("Cloud Run deploy settings and names", () => {
  it("defaults the prefix from the project and the GKE location from the region; needs no queue URL", () => {
    const s = settingsOf();
    assert.equal(s.target, "cloudrun");
    assert.deepEqual(s.gcp, {
      project: "my-project",
      region: "europe-west1",
      gkeCluster: "prod",
      gkeLocation: "europe-west1",
      prefix: "crdfn-shop-",
      source: ".",
      runtime: "nodejs22",
      maxInstances: 10,
    });
  });

  it("names an operator's function, service account (GKE's user) and Pub/Sub resources", () => {
    const n = gcpNamesOf(op("Greeting"), settingsOf());
    assert.deepEqual(n, {
      tf: "greeting",
      function: "crdfn-shop-greeting",
      accountId: "crdfn-shop-greeting",
      email: "crdfn-shop-greeting@my-project.iam.gserviceaccount.com",
      pubsub: {
        topic: "projects/my-project/topics/crdfn-shop-greeting-events",
        deadLetterTopic: "projects/my-project/topics/crdfn-shop-greeting-events-dead-letter",
        subscription: "projects/my-project/subscriptions/crdfn-shop-greeting-events",
        deadLetterSubscription: "projects/my-project/subscriptions/crdfn-shop-greeting-events-dead-letter",
      },
    });
  });

  it("refuses in one line a prefix or an operator name too long for a service account id", () => {
    assert.throws(() => settingsOf({ gcp: { ...known.gcp, prefix: "Shop-" } }), /^ConfigError: test: gcp\.prefix: must be lower-case letters/);
    assert.throws(
      () => settingsOf({ project: "a-very-long-project-name" }),
      (e: Error) => e instanceof ConfigError && /gcp\.prefix: crdfn-a-very-long-project-name- is 31 characters; at most 22/.test(e.message),
    );
    assert.throws(
      () => gcpNamesOf(op("ExtraordinarilyLongKind"), settingsOf()),
      /gcp\.prefix: crdfn-shop-extraordinarilylongkind \(the ExtraordinarilyLongKind function's service account\) is longer than GCP's 30 characters/,
    );
  });

  it("finds the source folder from where terraform runs, wherever out is", () => {
    const base = "/home/me/shop";
    assert.equal(sourceDirFromTerraform(settingsOf({ out: "deploy" }), base), "../..");
    assert.equal(sourceDirFromTerraform(settingsOf({ out: "infra/deploy", gcp: { ...known.gcp, source: "functions" } }), base), "../../../functions");
    // Not a subfolder: the project is a sibling of out, not its parent's parent.
    assert.equal(sourceDirFromTerraform(settingsOf({ out: "../shop-deploy" }), base), "../../shop");
    // Absolute out: seen from anywhere, so the project is written absolute, never "/".
    assert.equal(sourceDirFromTerraform(settingsOf({ out: "/srv/deploy/shop" }), base), "/home/me/shop");
    assert.equal(sourceDirFromTerraform(settingsOf({ out: "/srv/deploy/shop", gcp: { ...known.gcp, source: "fn" } }), base), "/home/me/shop/fn");
    assert.throws(() => sourceDirFromTerraform(settingsOf(), "shop"), /settings folder must be absolute/);
  });
});
