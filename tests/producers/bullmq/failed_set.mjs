// BullMQ's own API on a queue's failed set, as Bull Board and the app would use it:
//   node failed_set.mjs <redis url> <queue> retry <id>...    job.retry("failed") (Bull Board "Retry")
//   node failed_set.mjs <redis url> <queue> remove <id>...   job.remove() (Bull Board "Clean"/"Remove")
//   node failed_set.mjs <redis url> <queue> trim <count> <keep>
//       <count> more jobs fail with removeOnFail: { count: <keep> }: BullMQ trims the failed set to
//       the newest <keep> jobs (and deletes the trimmed jobs' hashes) as each one fails
import { Job, Queue, Worker } from "bullmq";

const [url, queueName, action, ...rest] = process.argv.slice(2);
const parsed = new URL(url);
const connection = { host: parsed.hostname, port: Number(parsed.port), db: Number(parsed.pathname.slice(1) || 0) };
const queue = new Queue(queueName, { connection });

if (action === "retry" || action === "remove") {
  for (const id of rest) {
    const job = await Job.fromId(queue, id);
    if (!job) {
      console.error(`no job ${id}`);
      process.exit(1);
    }
    if (action === "retry") await job.retry("failed");
    else await job.remove();
  }
} else if (action === "trim") {
  const [count, keep] = rest.map(Number);
  let done = 0;
  const worker = new Worker(
    queueName,
    async (job) => {
      throw new Error(`invoice for order ${job.data.orderId} rejected`);
    },
    { connection },
  );
  worker.on("failed", () => {
    done += 1;
  });
  for (let i = 1; i <= count; i++) {
    await queue.add("send-invoice", { orderId: 900 + i }, { attempts: 1, removeOnFail: { count: keep } });
  }
  const deadline = Date.now() + 30000;
  while (done < count) {
    if (Date.now() > deadline) {
      console.error("timed out waiting for failed jobs");
      process.exit(1);
    }
    await new Promise((r) => setTimeout(r, 50));
  }
  await worker.close();
} else {
  console.error("usage: failed_set.mjs <url> <queue> retry|remove <id>... | trim <count> <keep>");
  process.exit(2);
}
await queue.close();
