// functions-framework entry: `functions-framework --source examples/crontab/http.ts --target crontab`
// (HTTP) or `--target crontab-events --signature-type cloudevent` (CloudEvent).
import { cloudEvent, http } from "@google-cloud/functions-framework";
import { cloudEventHandler, httpHandler } from "crdfn/http";
import operator from "./operator.ts";

http("crontab", httpHandler(operator));
cloudEvent("crontab-events", cloudEventHandler(operator));
