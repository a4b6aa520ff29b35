// `serverless package` as the tests run it: offline (placeholder AWS credentials, a proxy that
// refuses, so any network attempt fails) with the parameters a deploy must give, writing the
// CloudFormation and the zips into a folder of the caller's.
import { execFile } from "node:child_process";
import { join } from "node:path";
import { promisify } from "node:util";
import { packageRoot } from "../../emulator/paths.ts";

const run = promisify(execFile);

/** The parameters serverless.yml requires (no defaults), with values of the right shape. */
export const PACKAGE_PARAMS = {
  eksCluster: "prod-cluster",
  kubeServer: "https://0123456789ABCDEF.gr7.us-east-1.eks.amazonaws.com",
  kubeCaData: Buffer.from("-----BEGIN CERTIFICATE-----\n…\n-----END CERTIFICATE-----\n").toString("base64"),
  eventKeysVersion: "6b9f1c3e-0000-4000-8000-000000000001",
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
    // No AWS account: placeholders, and a proxy that refuses, so any network attempt fails.
    AWS_ACCESS_KEY_ID: "AKIAIOSFODNN7EXAMPLE",
    AWS_SECRET_ACCESS_KEY: "placeholder-not-a-secret",
    HTTPS_PROXY: "http://127.0.0.1:9",
    HTTP_PROXY: "http://127.0.0.1:9",
    SLS_TELEMETRY_DISABLED: "1",
    SLS_NOTIFICATIONS_MODE: "off",
    SLS_INTERACTIVE_SETUP_DISABLE: "1",
    CI: "1",
  };
  const params = Object.entries(PACKAGE_PARAMS).map(([k, v]) => `--param=${k}=${v}`);
  const result = await run(
    process.execPath,
    [join(packageRoot, "node_modules", "serverless", "bin", "serverless.js"), "package", "--stage", o.stage, "--region", o.region, "--package", o.out, ...params],
    { cwd: o.cwd, env, maxBuffer: 16 * 1024 * 1024, timeout: o.timeoutMs },
  );
  return result.stdout + result.stderr;
}
