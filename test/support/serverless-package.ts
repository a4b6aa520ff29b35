// `serverless package` as the tests run it: offline (placeholder AWS credentials, a proxy that
// refuses, so any network attempt fails) with the parameters a deploy must give, writing the
// CloudFormation and the zips into a folder of the caller's. What it writes (the CloudFormation
// template, one zip per function) is what a deploy would upload; the tests read it as it is.
import { execFile } from "node:child_process";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { promisify } from "node:util";
import { inflateRawSync } from "node:zlib";
import assert from "node:assert/strict";
import { packageRoot } from "../../emulator/paths.ts";

const run = promisify(execFile);

/** The parameters serverless.yml requires (no defaults), with values of the right shape. */
export const PACKAGE_PARAMS = {
  eksCluster: "prod-cluster",
  kubeServer: "https://0123456789ABCDEF.gr7.us-east-1.eks.amazonaws.com",
  kubeCaData: Buffer.from("-----BEGIN CERTIFICATE-----\n…\n-----END CERTIFICATE-----\n").toString("base64"),
  eventKeysLabel: "k1",
};

/** Serverless Framework offline: no AWS account (placeholders), a proxy that refuses so any network attempt fails, no telemetry or prompts. */
export const SERVERLESS_OFFLINE = {
  AWS_ACCESS_KEY_ID: "AKIAIOSFODNN7EXAMPLE",
  AWS_SECRET_ACCESS_KEY: "placeholder-not-a-secret",
  HTTPS_PROXY: "http://127.0.0.1:9",
  HTTP_PROXY: "http://127.0.0.1:9",
  SLS_TELEMETRY_DISABLED: "1",
  SLS_NOTIFICATIONS_MODE: "off",
  SLS_INTERACTIVE_SETUP_DISABLE: "1",
  CI: "1",
};

export interface PackageOptions {
  /** The folder of serverless.yml. */
  cwd: string;
  /** Where the CloudFormation templates and zips go (serverless's --package). */
  out: string;
  stage: string;
  region: string;
  timeoutMs: number;
}

/** Runs `serverless package` offline; returns its output. The template is `<out>/cloudformation-template-update-stack.json`. */
export async function serverlessPackage(o: PackageOptions): Promise<string> {
  const env: NodeJS.ProcessEnv = {
    PATH: `${join(packageRoot, "node_modules", ".bin")}:${process.env.PATH ?? ""}`,
    HOME: process.env.HOME ?? o.out,
    ...SERVERLESS_OFFLINE,
  };
  const params = Object.entries(PACKAGE_PARAMS).map(([k, v]) => `--param=${k}=${v}`);
  const result = await run(
    process.execPath,
    [
      join(packageRoot, "node_modules", "serverless", "bin", "serverless.js"),
      "package",
      "--stage",
      o.stage,
      "--region",
      o.region,
      "--package",
      o.out,
      ...params,
    ],
    { cwd: o.cwd, env, maxBuffer: 16 * 1024 * 1024, timeout: o.timeoutMs },
  );
  return result.stdout + result.stderr;
}

export interface CfnResource {
  Type: string;
  Properties: Record<string, unknown>;
  DependsOn?: string[];
}

export interface Packaged {
  /** serverless's stdout and stderr. */
  output: string;
  /** cloudformation-template-update-stack.json's resources. */
  resources: Record<string, CfnResource>;
  ms: number;
}

/** This checkout's serverless.yml packaged for stage `test` in us-east-1 into `dir` (`--package`: the checkout's .serverless is left alone). */
export async function packageCheckout(dir: string): Promise<Packaged> {
  const started = Date.now();
  const output = await serverlessPackage({ cwd: packageRoot, out: dir, stage: "test", region: "us-east-1", timeoutMs: 280_000 });
  const template = JSON.parse(readFileSync(join(dir, "cloudformation-template-update-stack.json"), "utf8")) as { Resources: Record<string, CfnResource> };
  return { output, resources: template.Resources, ms: Date.now() - started };
}

/** The files of a zip archive (stored or deflated entries), read from its central directory. */
export function unzip(zip: Buffer): Record<string, Buffer> {
  const eocd = zip.lastIndexOf(Buffer.from([0x50, 0x4b, 0x05, 0x06]));
  assert.ok(eocd >= 0, "a zip archive");
  const count = zip.readUInt16LE(eocd + 10);
  let at = zip.readUInt32LE(eocd + 16);
  const files: Record<string, Buffer> = {};
  for (let i = 0; i < count; i++) {
    const method = zip.readUInt16LE(at + 10);
    const compressed = zip.readUInt32LE(at + 20);
    const nameLength = zip.readUInt16LE(at + 28);
    const extraLength = zip.readUInt16LE(at + 30);
    const commentLength = zip.readUInt16LE(at + 32);
    const local = zip.readUInt32LE(at + 42);
    const name = zip.toString("utf8", at + 46, at + 46 + nameLength);
    const dataAt = local + 30 + zip.readUInt16LE(local + 26) + zip.readUInt16LE(local + 28);
    const data = zip.subarray(dataAt, dataAt + compressed);
    if (!name.endsWith("/")) files[name] = method === 8 ? inflateRawSync(data) : Buffer.from(data);
    at += 46 + nameLength + extraLength + commentLength;
  }
  return files;
}
