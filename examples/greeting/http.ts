// functions-framework entry: `functions-framework --source examples/greeting/http.ts --target greeting`
// (HTTP) or `--target greeting-events --signature-type cloudevent` (CloudEvent).
import { cloudEvent, http } from "@google-cloud/functions-framework";
import { cloudEventHandler, httpHandler } from "crdfn/http";
import operator from "./operator.ts";

http("greeting", httpHandler(operator));
cloudEvent("greeting-events", cloudEventHandler(operator));
