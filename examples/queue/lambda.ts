// Lambda entry (serverless.yml: handler examples/queue/lambda.handler).
import { lambdaHandler } from "crdfn/lambda";
import operator from "./operator.ts";

export const handler = lambdaHandler(operator);
