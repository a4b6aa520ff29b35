// Process entry of the bridge container (and of `node bridge/main.ts` in tests).
import { bridgeCommand } from "./command.ts";

await bridgeCommand().parseAsync(process.argv);
process.exit(process.exitCode ?? 0);
