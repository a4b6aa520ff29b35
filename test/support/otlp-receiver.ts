// A real OTLP/HTTP traces receiver for tests: what the OpenTelemetry exporter sends
// (ExportTraceServiceRequest, protobuf, POST /v1/traces), decoded with the protobuf wire format
// for the fields a test asserts on, so a test reads the spans as a collector would get them. With
// `grpc`, also OTLP over gRPC, which is all kube-apiserver exports (its TracingConfiguration).
import { createServer, type Server } from "node:http";
import { createServer as createH2Server, type Http2Server, type ServerHttp2Session } from "node:http2";
import { gunzipSync } from "node:zlib";
import type { AddressInfo } from "node:net";

export interface ReceivedSpan {
  traceId: string;
  spanId: string;
  /** "" for a root span. */
  parentSpanId: string;
  name: string;
  /** Nanoseconds since the epoch. */
  startNs: bigint;
  endNs: bigint;
  attributes: Record<string, string | number | boolean>;
  /** 0 unset, 1 ok, 2 error. */
  statusCode: number;
  /** service.name of the resource that sent it. */
  service: string;
  /** Its span links: the other traces it follows from (decodeTraces always fills it in). */
  links?: ReceivedLink[];
}

export interface ReceivedLink {
  traceId: string;
  spanId: string;
  attributes: Record<string, string | number | boolean>;
}

export interface OtlpReceiver {
  /** The base URL, as OTEL_EXPORTER_OTLP_ENDPOINT takes it. */
  endpoint: string;
  /** With `grpc`: the OTLP/gRPC host:port (plaintext), as kube-apiserver's TracingConfiguration takes it. */
  grpcEndpoint?: string;
  spans: ReceivedSpan[];
  /** How many export requests arrived. */
  requests: number;
  close(): Promise<void>;
}

type Field = { no: number; wire: number; varint?: bigint; bytes?: Buffer };

/** The fields of one protobuf message, in order (repeated fields repeat). */
function fieldsOf(buf: Buffer): Field[] {
  const out: Field[] = [];
  let at = 0;
  const varint = (): bigint => {
    let v = 0n;
    for (let shift = 0n; ; shift += 7n) {
      const b = buf[at++]!;
      v |= BigInt(b & 0x7f) << shift;
      if ((b & 0x80) === 0) return v;
    }
  };
  while (at < buf.length) {
    const tag = Number(varint());
    const no = tag >>> 3;
    const wire = tag & 7;
    if (wire === 0) out.push({ no, wire, varint: varint() });
    else if (wire === 1) out.push({ no, wire, bytes: buf.subarray(at, (at += 8)) });
    else if (wire === 5) out.push({ no, wire, bytes: buf.subarray(at, (at += 4)) });
    else if (wire === 2) {
      const len = Number(varint());
      out.push({ no, wire, bytes: buf.subarray(at, (at += len)) });
    } else throw new Error(`protobuf wire type ${wire} not expected in OTLP traces`);
  }
  return out;
}

const sub = (fields: Field[], no: number): Buffer[] => fields.filter((f) => f.no === no).map((f) => f.bytes!);

function valueOf(buf: Buffer): string | number | boolean {
  const [f] = fieldsOf(buf);
  if (f === undefined) return "";
  if (f.no === 1) return f.bytes!.toString("utf8");
  if (f.no === 2) return f.varint !== 0n;
  if (f.no === 3) return Number(BigInt.asIntN(64, f.varint!));
  if (f.no === 4) return f.bytes!.readDoubleLE(0);
  return f.bytes?.toString("hex") ?? "";
}

function attributesOf(kvs: Buffer[]): Record<string, string | number | boolean> {
  const out: Record<string, string | number | boolean> = {};
  for (const kv of kvs) {
    const f = fieldsOf(kv);
    out[sub(f, 1)[0]?.toString("utf8") ?? ""] = valueOf(sub(f, 2)[0] ?? Buffer.alloc(0));
  }
  return out;
}

/** The spans of one ExportTraceServiceRequest. */
export function decodeTraces(body: Buffer): ReceivedSpan[] {
  const spans: ReceivedSpan[] = [];
  for (const rs of sub(fieldsOf(body), 1)) {
    const rsf = fieldsOf(rs);
    const resource = attributesOf(sub(fieldsOf(sub(rsf, 1)[0] ?? Buffer.alloc(0)), 1));
    for (const ss of sub(rsf, 2)) {
      for (const s of sub(fieldsOf(ss), 2)) {
        const f = fieldsOf(s);
        const hex = (no: number) => sub(f, no)[0]?.toString("hex") ?? "";
        const status = fieldsOf(sub(f, 15)[0] ?? Buffer.alloc(0));
        spans.push({
          traceId: hex(1),
          spanId: hex(2),
          parentSpanId: hex(4),
          name: sub(f, 5)[0]?.toString("utf8") ?? "",
          startNs: sub(f, 7)[0]?.readBigUInt64LE(0) ?? 0n,
          endNs: sub(f, 8)[0]?.readBigUInt64LE(0) ?? 0n,
          attributes: attributesOf(sub(f, 9)),
          statusCode: Number(status.find((x) => x.no === 3)?.varint ?? 0n),
          service: String(resource["service.name"] ?? ""),
          links: sub(f, 13).map((l) => {
            const lf = fieldsOf(l);
            return { traceId: sub(lf, 1)[0]?.toString("hex") ?? "", spanId: sub(lf, 2)[0]?.toString("hex") ?? "", attributes: attributesOf(sub(lf, 4)) };
          }),
        });
      }
    }
  }
  return spans;
}

const GRPC_EXPORT = "/opentelemetry.proto.collector.trace.v1.TraceService/Export";

/**
 * OTLP/gRPC on plaintext HTTP/2, written out rather than through a gRPC library: one unary
 * method, whose request is the same ExportTraceServiceRequest as the HTTP body, each message
 * framed by a compressed flag and a 4-byte length; answered with an empty response and grpc-status 0.
 */
async function startGrpcReceiver(onSpans: (spans: ReceivedSpan[]) => void): Promise<{ endpoint: string; close(): void }> {
  const server: Http2Server = createH2Server();
  const sessions = new Set<ServerHttp2Session>();
  server.on("session", (session) => {
    sessions.add(session);
    session.on("close", () => sessions.delete(session));
  });
  server.on("stream", (stream, headers) => {
    const chunks: Buffer[] = [];
    stream.on("data", (c: Buffer) => chunks.push(c));
    stream.on("end", () => {
      if (headers[":path"] !== GRPC_EXPORT) {
        stream.respond({ ":status": 200, "content-type": "application/grpc", "grpc-status": "12" }, { endStream: true });
        return;
      }
      const raw = Buffer.concat(chunks);
      for (let at = 0; at + 5 <= raw.length;) {
        const length = raw.readUInt32BE(at + 1);
        const message = raw.subarray(at + 5, at + 5 + length);
        onSpans(decodeTraces(raw[at] === 1 ? gunzipSync(message) : message));
        at += 5 + length;
      }
      stream.respond({ ":status": 200, "content-type": "application/grpc" }, { waitForTrailers: true });
      stream.on("wantTrailers", () => stream.sendTrailers({ "grpc-status": "0" }));
      stream.end(Buffer.from([0, 0, 0, 0, 0]));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    endpoint: `127.0.0.1:${(server.address() as AddressInfo).port}`,
    close: () => {
      server.close();
      // Its clients (kube-apiserver) keep their sessions open; closing must not wait for them.
      for (const session of sessions) session.destroy();
    },
  };
}

/** Starts a receiver on a free loopback port (and, with `grpc`, an OTLP/gRPC one beside it). */
export async function startOtlpReceiver(o: { grpc?: boolean } = {}): Promise<OtlpReceiver> {
  const receiver = { spans: [] as ReceivedSpan[], requests: 0 };
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      if (req.method !== "POST" || req.url !== "/v1/traces") {
        res.writeHead(404).end();
        return;
      }
      const raw = Buffer.concat(chunks);
      receiver.requests++;
      receiver.spans.push(...decodeTraces(req.headers["content-encoding"] === "gzip" ? gunzipSync(raw) : raw));
      // An empty ExportTraceServiceResponse: everything accepted.
      res.writeHead(200, { "content-type": "application/x-protobuf" }).end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  const grpc = o.grpc
    ? await startGrpcReceiver((spans) => {
        receiver.requests++;
        receiver.spans.push(...spans);
      })
    : undefined;
  return Object.assign(receiver, {
    endpoint: `http://127.0.0.1:${port}`,
    ...(grpc ? { grpcEndpoint: grpc.endpoint } : {}),
    close: async () => {
      await new Promise<void>((resolve) => {
        server.close(() => resolve());
        // The exporter keeps its connection alive; a test's end need not wait for it to idle out.
        server.closeAllConnections();
      });
      grpc?.close();
    },
  });
}
