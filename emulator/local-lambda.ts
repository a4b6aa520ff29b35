// A Lambda function run in the real Lambda runtime, on this machine: the Runtime Interface
// Emulator (lambda-rie.ts) serving the Runtime API and the invoke endpoint, and the Node.js
// runtime interface client (lambda-ric.ts) as its bootstrap, loading the handler from the task
// root exactly as a Lambda Node runtime does (the handler string, .mjs resolution, the
// Runtime API's answers). For tests and benchmarks of a packaged bundle.
import { join } from "node:path";
import { withSetupDefaults, type BinaryOptions } from "./binaries.ts";
import { lambdaRic } from "./lambda-ric.ts";
import { lambdaRieBinary } from "./lambda-rie.ts";
import { freePort } from "./ports.ts";
import { logTail, startServer, type RunningServer } from "./process.ts";
import { startScratch } from "./reaper.ts";

/** RIE's invoke path: what Lambda's Invoke API is, for one function. */
export const INVOKE_PATH = "/2015-03-31/functions/function/invocations";

export interface LocalLambdaOptions {
  /** The unzipped deployment package (LAMBDA_TASK_ROOT). */
  taskRoot: string;
  /** The function's handler string, e.g. `examples/greeting/lambda.handler`. */
  handler: string;
  /** The function's own environment (its configured variables). */
  environment: Record<string, string>;
  functionName: string;
  timeoutSeconds: number;
  memoryMiB: number;
  region: string;
  /** The environment the runtime's pieces are built or found with (CRDFN_BIN_DIR, the cache). */
  env?: NodeJS.ProcessEnv;
  log?: (line: string) => void;
}

export interface LocalLambda {
  /** Invokes the function once with this event; its answer, parsed. */
  invoke(event: unknown): Promise<{ status: number; body: unknown }>;
  /** When RIE was spawned (performance.now()). */
  spawnedAt: number;
  /** RIE's and the function's output (Lambda's log stream). */
  logFile: string;
  logTail(): string;
  stop(): Promise<void>;
}

/** Builds or finds RIE and the runtime interface client (first run: minutes, with progress). */
export async function localLambdaRuntime(o: BinaryOptions): Promise<{ rie: string; ric: string }> {
  const [rie, ric] = await Promise.all([lambdaRieBinary(o), lambdaRic(o)]);
  return { rie, ric };
}

export async function startLocalLambda(o: LocalLambdaOptions): Promise<LocalLambda> {
  const { env, log } = withSetupDefaults(o);
  const { rie, ric } = await localLambdaRuntime({ env, log });
  const scratch = startScratch("crdfn-lambda");
  const { dir, reaper } = scratch;
  let server: RunningServer | undefined;
  const stop = async () => {
    await server?.stop(2000);
    await scratch.remove();
  };
  try {
    const [invokePort, runtimeApiPort] = [await freePort(), await freePort()];
    const base = `http://127.0.0.1:${invokePort}`;
    const logFile = join(dir, "lambda.log");
    // What Lambda sets in a function's environment (RIE hands its own environment to the runtime).
    const lambdaEnv: Record<string, string> = {
      PATH: env.PATH ?? "/usr/bin:/bin",
      LAMBDA_TASK_ROOT: o.taskRoot,
      AWS_LAMBDA_FUNCTION_NAME: o.functionName,
      AWS_LAMBDA_FUNCTION_TIMEOUT: String(o.timeoutSeconds),
      AWS_LAMBDA_FUNCTION_MEMORY_SIZE: String(o.memoryMiB),
      AWS_REGION: o.region,
      AWS_DEFAULT_REGION: o.region,
      TZ: ":UTC",
      ...o.environment,
    };
    const spawnedAt = performance.now();
    server = await startServer(
      {
        name: "the Lambda Runtime Interface Emulator",
        command: rie,
        // Its own log level on the command line: it would read LOG_LEVEL, which is the function's
        // (crdfn's "silent" is no level of RIE's). Then the bootstrap (Node and the runtime
        // interface client), then the handler: RIE sets _HANDLER from the last argument.
        args: [
          "--log-level",
          "info",
          "--runtime-interface-emulator-address",
          `127.0.0.1:${invokePort}`,
          "--runtime-api-address",
          `127.0.0.1:${runtimeApiPort}`,
          process.execPath,
          ric,
          o.handler,
        ],
        logFile,
        env: lambdaEnv,
        cwd: o.taskRoot,
        // Any HTTP answer on its own address means it listens (the invoke path only takes POST).
        ready: async () => (await fetch(`${base}/`)).status > 0,
      },
      reaper,
    );
    return {
      spawnedAt,
      logFile,
      logTail: () => logTail(logFile),
      invoke: async (event) => {
        const res = await fetch(`${base}${INVOKE_PATH}`, {
          method: "POST",
          body: JSON.stringify(event),
          signal: AbortSignal.timeout((o.timeoutSeconds + 30) * 1000),
        });
        const text = await res.text();
        let body: unknown = text;
        try {
          body = JSON.parse(text);
        } catch {
          // Not JSON (RIE's own error text): returned as it is.
        }
        return { status: res.status, body };
      },
      stop,
    };
  } catch (e) {
    await stop();
    throw e;
  }
}
