// A real pg-boss worker that throws: each job fails `attempts` times and stays in pgboss.job in
// state `failed` (the test producer for the pgboss source kind).
// usage: node produce.mjs <postgres url> <queue> <count> <attempts>   → prints the failed job ids (JSON)
import PgBoss from "pg-boss";

const [url, queue, count = "1", attempts = "2"] = process.argv.slice(2);

class InvoiceRejected extends Error {
  constructor(message) {
    super(message);
    this.name = "InvoiceRejected";
  }
}

const boss = new PgBoss({ connectionString: url, supervise: false, schedule: false });
boss.on("error", (err) => console.error(err));
await boss.start();
await boss.createQueue(queue);
const ids = [];
for (let i = 1; i <= Number(count); i++) {
  ids.push(await boss.send(queue, { orderId: i }, { retryLimit: Number(attempts) - 1, retryDelay: 0 }));
}
await boss.work(queue, { pollingIntervalSeconds: 0.5, batchSize: 1 }, async ([job]) => {
  throw new InvoiceRejected(`invoice for order ${job.data.orderId} rejected`);
});
const deadline = Date.now() + 60000;
for (;;) {
  const jobs = await Promise.all(ids.map((id) => boss.getJobById(queue, id)));
  if (jobs.every((job) => job && job.state === "failed")) break;
  if (Date.now() > deadline) {
    console.error("timed out waiting for failed jobs");
    process.exit(1);
  }
  await new Promise((r) => setTimeout(r, 100));
}
await boss.stop({ graceful: false, wait: true });
console.log(JSON.stringify(ids));
