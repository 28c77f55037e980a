// A real BullMQ worker that throws, traced by bullmq-otel and the OpenTelemetry Node SDK: each job
// is added inside a `checkout` span, so BullMQ writes its trace context into the job (`opts.tm`, and
// `tm` when it fails). Prints the trace id of every job it added.
// usage: node produce_traced.mjs <redis url> <queue> <count>
import { trace } from "@opentelemetry/api";
import { NodeTracerProvider } from "@opentelemetry/sdk-trace-node";
import { Queue, Worker } from "bullmq";
import { BullMQOtel } from "bullmq-otel";

const [url, queueName, count = "1"] = process.argv.slice(2);
const parsed = new URL(url);
const connection = { host: parsed.hostname, port: Number(parsed.port), db: Number(parsed.pathname.slice(1) || 0) };

new NodeTracerProvider().register();
const telemetry = new BullMQOtel({ tracerName: "dlq-bridge-test" });
const tracer = trace.getTracer("checkout");

const queue = new Queue(queueName, { connection, telemetry });
const before = await queue.getFailedCount();
const traces = {};
for (let i = 1; i <= Number(count); i++) {
  await tracer.startActiveSpan("checkout", async (span) => {
    const job = await queue.add("send-invoice", { orderId: i }, { attempts: 1 });
    traces[job.id] = span.spanContext().traceId;
    span.end();
  });
}
const worker = new Worker(
  queueName,
  async (job) => {
    throw new Error(`invoice for order ${job.data.orderId} rejected`);
  },
  { connection, telemetry },
);
const deadline = Date.now() + 30000;
while ((await queue.getFailedCount()) < before + Number(count)) {
  if (Date.now() > deadline) {
    console.error("timed out waiting for failed jobs");
    process.exit(1);
  }
  await new Promise((r) => setTimeout(r, 50));
}
await worker.close();
await queue.close();
console.log(JSON.stringify({ traces }));
