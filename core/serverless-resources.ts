// The AWS side of each operator, for serverless.yml to read with ${file(...)}: its function, its
// FIFO event queue (written by the bridge: one message group per object, so one object's events
// run in order) and its standard requeue queue (per-message DelaySeconds, which FIFO refuses —
// functions/runtime/requeue.ts), each dead-lettering after 5 receives, everything SSE-encrypted,
// and a role that can do nothing but consume those two queues, requeue, and write its own logs.
// Service-wide values (timeouts, batch size, concurrency) stay in serverless.yml's custom/params.
import type { Operator } from "./operator.ts";
import type { DeploySettings } from "./deploy-settings.ts";
import { operatorName } from "./operator-rbac.ts";
import { eventQueueName } from "./bridge-manifests.ts";

type Json = Record<string, unknown>;

const getAtt = (id: string) => ({ "Fn::GetAtt": [id, "Arn"] });
/** A CloudFormation logical id from the kind (CronTab → Crontab, as serverless names the function's resources). */
const logicalId = (operator: Operator<unknown>): string => {
  const n = operatorName(operator).replace(/[^a-z0-9]/g, "");
  return n.charAt(0).toUpperCase() + n.slice(1);
};

const DLQ_AFTER_RECEIVES = 5;
const FOURTEEN_DAYS = 1_209_600;

/** serverless.yml `functions:` — one per operator, triggered by its two queues with partial batch responses. */
/** `cluster`: the id the bridge puts in every event; a function serves only that cluster. */
export function serverlessFunctionsOf(operators: ReadonlyArray<{ operator: Operator<unknown>; handler: string }>, cluster: string): Json {
  const trigger = (queue: string) => ({
    sqs: {
      arn: getAtt(queue),
      batchSize: "${self:custom.batchSize}",
      functionResponseType: "ReportBatchItemFailures",
      maximumConcurrency: "${param:maxConcurrency}",
    },
  });
  return Object.fromEntries(
    operators.map(({ operator, handler }) => {
      const id = logicalId(operator);
      return [
        operatorName(operator),
        {
          handler,
          role: `${id}FunctionRole`,
          environment: { CRDFN_CLUSTER: cluster, CRDFN_STANDARD_QUEUE_URL: { Ref: `${id}RequeueQueue` } },
          events: [trigger(`${id}EventsQueue`), trigger(`${id}RequeueQueue`)],
        },
      ];
    }),
  );
}

/** serverless.yml `resources:` — Resources and Outputs of every operator. */
export function serverlessResourcesOf(operators: ReadonlyArray<Operator<unknown>>, s: DeploySettings): Json {
  const resources: Json = {};
  const outputs: Json = {};
  for (const op of operators) {
    const id = logicalId(op);
    const n = operatorName(op);
    const base = `${s.queues.prefix}${n}`;
    const queue = (props: Json): Json => ({ Type: "AWS::SQS::Queue", Properties: { ...props, SqsManagedSseEnabled: true } });
    const redrive = (dlq: string) => ({ RedrivePolicy: { deadLetterTargetArn: getAtt(dlq), maxReceiveCount: DLQ_AFTER_RECEIVES } });
    const consumed = [getAtt(`${id}EventsQueue`), getAtt(`${id}RequeueQueue`)];
    Object.assign(resources, {
      [`${id}EventsQueue`]: queue({
        QueueName: eventQueueName(op, s),
        FifoQueue: true,
        // The bridge sets MessageDeduplicationId (uid + resourceVersion) itself.
        ContentBasedDeduplication: false,
        // One message group per object: high-throughput FIFO partitions by group.
        DeduplicationScope: "messageGroup",
        FifoThroughputLimit: "perMessageGroupId",
        VisibilityTimeout: "${self:custom.visibilityTimeoutSeconds}",
        ...redrive(`${id}EventsDlq`),
      }),
      [`${id}EventsDlq`]: queue({ QueueName: `${base}-dlq.fifo`, FifoQueue: true, MessageRetentionPeriod: FOURTEEN_DAYS }),
      [`${id}RequeueQueue`]: queue({ QueueName: `${base}-requeue`, VisibilityTimeout: "${self:custom.visibilityTimeoutSeconds}", ...redrive(`${id}RequeueDlq`) }),
      [`${id}RequeueDlq`]: queue({ QueueName: `${base}-requeue-dlq`, MessageRetentionPeriod: FOURTEEN_DAYS }),
      [`${id}FunctionRole`]: {
        Type: "AWS::IAM::Role",
        Properties: {
          // Mapped to the Kubernetes group crdfn:<operator> by an EKS access entry (functions/README.md).
          RoleName: `\${self:service}-\${sls:stage}-${n}-\${aws:region}`,
          AssumeRolePolicyDocument: {
            Version: "2012-10-17",
            Statement: [{ Effect: "Allow", Principal: { Service: "lambda.amazonaws.com" }, Action: "sts:AssumeRole" }],
          },
          Policies: [
            {
              PolicyName: n,
              PolicyDocument: {
                Version: "2012-10-17",
                Statement: [
                  {
                    Effect: "Allow",
                    Action: ["logs:CreateLogStream", "logs:PutLogEvents"],
                    Resource: { "Fn::Sub": `arn:\${AWS::Partition}:logs:\${AWS::Region}:\${AWS::AccountId}:log-group:/aws/lambda/\${self:service}-\${sls:stage}-${n}:*` },
                  },
                  // ChangeMessageVisibility: the adapters lengthen a retried message's visibility (backoff).
                  { Effect: "Allow", Action: ["sqs:ReceiveMessage", "sqs:DeleteMessage", "sqs:GetQueueAttributes", "sqs:ChangeMessageVisibility", "sqs:GetQueueUrl"], Resource: consumed },
                  { Effect: "Allow", Action: "sqs:SendMessage", Resource: getAtt(`${id}RequeueQueue`) },
                ],
              },
            },
          ],
        },
      },
    });
    Object.assign(outputs, {
      [`${id}EventsQueueUrl`]: { Description: `The bridge's queueUrl for ${op.resource.plural}`, Value: { Ref: `${id}EventsQueue` } },
      [`${id}FunctionRoleArn`]: { Description: `Map to the Kubernetes group crdfn:${n} (EKS access entry)`, Value: getAtt(`${id}FunctionRole`) },
    });
  }
  return { Resources: resources, Outputs: outputs };
}
