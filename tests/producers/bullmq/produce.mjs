// A real BullMQ worker that throws: each job fails `attempts` times and lands in
// bull:<queue>:failed (the test producer for the bullmq source kind).
// usage: node produce.mjs <redis url> <queue> <count> <attempts>
import { Queue, Worker, QueueEvents } from "bullmq";

const [url, queueName, count = "1", attempts = "2"] = process.argv.slice(2);
const parsed = new URL(url);
const connection = { host: parsed.hostname, port: Number(parsed.port), db: Number(parsed.pathname.slice(1) || 0) };

class InvoiceRejected extends Error {
  constructor(message) {
    super(message);
    this.name = "InvoiceRejected";
  }
}

const queue = new Queue(queueName, { connection });
const before = await queue.getFailedCount(); // jobs of earlier runs stay in the failed set
for (let i = 1; i <= Number(count); i++) {
  await queue.add("send-invoice", { orderId: i }, { attempts: Number(attempts) });
}
const worker = new Worker(
  queueName,
  async (job) => {
    throw new InvoiceRejected(`invoice for order ${job.data.orderId} rejected`);
  },
  { connection },
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
console.log(JSON.stringify({ failed: Number(count) }));
