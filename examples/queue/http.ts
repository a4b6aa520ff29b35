// functions-framework entry: `functions-framework --source examples/queue/http.ts --target queue`
// (HTTP) or `--target queue-events --signature-type cloudevent` (CloudEvent). Its effects build
// an SQS client from the environment: give the Cloud Run function AWS credentials to use them.
import { cloudEvent, http } from "@google-cloud/functions-framework";
import { cloudEventHandler, httpHandler } from "crdfn/http";
import operator from "./operator.ts";

http("queue", httpHandler(operator));
cloudEvent("queue-events", cloudEventHandler(operator));
