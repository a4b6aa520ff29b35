// The AWS side of each operator, for serverless.yml to read with ${file(...)}: its function, its
// FIFO event queue (written by the bridge: one message group per object, so one object's events
// run in order) dead-lettering after 5 receives, SSE-encrypted, and a role that can do nothing but
// consume that queue, send to it (deferring a message while the API server is unreachable), and
// write its own logs. Also the bridge's AWS identity: a role that may only send to those event
// queues, associated with the bridge's ServiceAccount by EKS Pod Identity. An operator's declared
// cloud permissions (`cloud.aws`: what its effects and finalize do) are added to its own role only.
// Service-wide values (timeouts, batch size, concurrency) stay in serverless.yml's custom/params.
import type { Operator } from "../core/operator.ts";
import type { LambdaDeploySettings } from "./settings.ts";
import { operatorName } from "./rbac.ts";
import { bridgeName } from "./bridge.ts";
import { deadLetterQueueName, eventQueueName } from "./queue-names.ts";
import { functionTracingEnv, type TracingDeploySettings } from "./tracing-env.ts";

type Json = Record<string, unknown>;

const getAtt = (id: string) => ({ "Fn::GetAtt": [id, "Arn"] });
/** A CloudFormation logical id from the kind (CronTab → Crontab, as serverless names the function's resources). */
const logicalId = (operator: Operator<unknown>): string => {
  const n = operatorName(operator).replace(/[^a-z0-9]/g, "");
  return n.charAt(0).toUpperCase() + n.slice(1);
};

const DLQ_AFTER_RECEIVES = 5;

/**
 * The Secrets Manager secret holding an operator's function's event keys (its operator's keys,
 * derived from the cluster's by `crdfn key derive`), `<service>/<stage>/event-keys/<operator>`: one
 * per operator, so a function can read its own operator's keys and no other's. The function is
 * given its name (CRDFN_EVENT_KEYS_SECRET) and the staging label to read (param eventKeysLabel;
 * AWSCURRENT is the usual one) and fetches it at cold start, again after a TTL: the function's
 * configuration, which lambda:GetFunctionConfiguration shows, never holds a key (checkov
 * CKV_AWS_173, CKV_AWS_45), and a rotated secret reaches warm functions without a deploy.
 */
export const eventKeysSecretName = (operator: Operator<unknown>): string => `\${self:service}/\${sls:stage}/event-keys/${operatorName(operator)}`;
const FOURTEEN_DAYS = 1_209_600;

/**
 * serverless.yml `functions:` — one per operator, triggered by its event queue with partial batch
 * responses. `cluster`: the id the bridge puts in every event; a function serves only that cluster.
 */

/**
 * The IAM role of an operator's Lambda: <project>-<stage>-<operator>-<region>. The stack is
 * deployed in the queues' region (it creates them), so only the stage is left to the deploy.
 */
export function lambdaRoleName(op: Operator<unknown>, s: LambdaDeploySettings, stage: string): string {
  return `${s.project}-${stage}-${operatorName(op)}-${s.queues.region}`;
}

/** The AWS account of queues.urlBase (https://sqs.<region>.amazonaws.com/<account id>), when it is AWS's. */
export function awsAccountOf(s: LambdaDeploySettings): string | undefined {
  return /^\/(\d{12})$/.exec(new URL(s.queues.urlBase).pathname)?.[1];
}

export function serverlessFunctionsOf(
  operators: ReadonlyArray<{ operator: Operator<unknown>; handler: string }>,
  cluster: string,
  tracing?: TracingDeploySettings,
): Json {
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
          environment: {
            CRDFN_CLUSTER: cluster,
            CRDFN_EVENT_KEYS_SECRET: eventKeysSecretName(operator),
            CRDFN_EVENT_KEYS_SECRET_STAGE: "${param:eventKeysLabel}",
            ...functionTracingEnv(tracing),
          },
          events: [trigger(`${id}EventsQueue`)],
        },
      ];
    }),
  );
}

/** serverless.yml `resources:` — Resources and Outputs of every operator, and the bridge's identity. */
export function serverlessResourcesOf(operators: ReadonlyArray<Operator<unknown>>, s: LambdaDeploySettings): Json {
  const resources: Json = {};
  const outputs: Json = {};
  for (const op of operators) {
    const id = logicalId(op);
    const n = operatorName(op);
    const queue = (props: Json): Json => ({ Type: "AWS::SQS::Queue", Properties: { ...props, SqsManagedSseEnabled: true } });
    const redrive = (dlq: string) => ({ RedrivePolicy: { deadLetterTargetArn: getAtt(dlq), maxReceiveCount: DLQ_AFTER_RECEIVES } });
    const events = getAtt(`${id}EventsQueue`);
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
      [`${id}EventsDlq`]: queue({ QueueName: deadLetterQueueName(op, s), FifoQueue: true, MessageRetentionPeriod: FOURTEEN_DAYS }),
      [`${id}FunctionRole`]: {
        Type: "AWS::IAM::Role",
        Properties: {
          // Mapped to the Kubernetes group crdfn:<operator> by an EKS access entry (<out>/functions/README.md, files.ts):
          // named by the project, as the queues are, so that README can write its ARN (lambdaRoleName).
          RoleName: lambdaRoleName(op, s, "${sls:stage}"),
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
                    Resource: {
                      "Fn::Sub": `arn:\${AWS::Partition}:logs:\${AWS::Region}:\${AWS::AccountId}:log-group:/aws/lambda/\${self:service}-\${sls:stage}-${n}:*`,
                    },
                  },
                  // ChangeMessageVisibility: the adapters lengthen a retried message's visibility (backoff).
                  {
                    Effect: "Allow",
                    Action: ["sqs:ReceiveMessage", "sqs:DeleteMessage", "sqs:GetQueueAttributes", "sqs:ChangeMessageVisibility", "sqs:GetQueueUrl"],
                    Resource: events,
                  },
                  // Its own queue only: a message deferred while the API server is unreachable goes back into its object's group.
                  { Effect: "Allow", Action: "sqs:SendMessage", Resource: events },
                  // Its own operator's key secret only; Secrets Manager ends a secret's ARN with 6 random characters.
                  {
                    Effect: "Allow",
                    Action: "secretsmanager:GetSecretValue",
                    Resource: {
                      "Fn::Sub": `arn:\${AWS::Partition}:secretsmanager:\${AWS::Region}:\${AWS::AccountId}:secret:${eventKeysSecretName(op)}-??????`,
                    },
                  },
                  ...declaredStatements(op),
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
  Object.assign(resources, bridgeIdentityOf(operators, s));
  outputs.BridgeRoleArn = { Description: `The bridge's role (EKS Pod Identity of ${s.bridge.namespace}/${bridgeName(s)})`, Value: getAtt("BridgeRole") };
  return { Resources: resources, Outputs: outputs };
}

/** The operator's own `cloud.aws` statements; an ARN naming `${AWS::…}` pseudo parameters is filled in by Fn::Sub. */
function declaredStatements(op: Operator<unknown>): Json[] {
  const arn = (resource: string): unknown => (/\$\{AWS::[A-Za-z]+\}/.test(resource) ? { "Fn::Sub": resource } : resource);
  return (op.cloud?.aws ?? []).map((p) => ({ Effect: "Allow", Action: [...p.actions], Resource: p.resources.map(arn) }));
}

/**
 * The bridge's AWS identity: a role that EKS Pod Identity hands to the pods of its ServiceAccount
 * (in the cluster named by the eksCluster parameter; the cluster needs the eks-pod-identity-agent
 * add-on), allowed to send to its operators' event queues and read their attributes (it checks a
 * queue exists and is FIFO), nothing else. SendMessageBatch is authorized as sqs:SendMessage.
 */
function bridgeIdentityOf(operators: ReadonlyArray<Operator<unknown>>, s: LambdaDeploySettings): Json {
  return {
    BridgeRole: {
      Type: "AWS::IAM::Role",
      Properties: {
        RoleName: `${s.project}-\${sls:stage}-bridge-${s.queues.region}`,
        AssumeRolePolicyDocument: {
          Version: "2012-10-17",
          Statement: [{ Effect: "Allow", Principal: { Service: "pods.eks.amazonaws.com" }, Action: ["sts:AssumeRole", "sts:TagSession"] }],
        },
        Policies: [
          {
            PolicyName: "publish",
            PolicyDocument: {
              Version: "2012-10-17",
              Statement: [
                {
                  Effect: "Allow",
                  Action: ["sqs:SendMessage", "sqs:GetQueueAttributes"],
                  Resource: operators.map((op) => getAtt(`${logicalId(op)}EventsQueue`)),
                },
              ],
            },
          },
        ],
      },
    },
    BridgePodIdentity: {
      Type: "AWS::EKS::PodIdentityAssociation",
      Properties: { ClusterName: "${param:eksCluster}", Namespace: s.bridge.namespace, ServiceAccount: bridgeName(s), RoleArn: getAtt("BridgeRole") },
    },
  };
}
