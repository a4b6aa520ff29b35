// Lambda entry (serverless.yml: handler functions/crontab/lambda.handler).
import { lambdaHandler } from "../adapters/lambda.ts";
import operator from "./operator.ts";

export const handler = lambdaHandler(operator);
