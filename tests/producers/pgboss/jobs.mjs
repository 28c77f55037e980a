// pg-boss's own API on failed jobs: retry or delete them by id.
// usage: node jobs.mjs <postgres url> <queue> retry|delete <id>...
import PgBoss from "pg-boss";

const [url, queue, action, ...ids] = process.argv.slice(2);
const boss = new PgBoss({ connectionString: url, supervise: false, schedule: false });
boss.on("error", (err) => console.error(err));
await boss.start();
if (action === "retry") await boss.retry(queue, ids);
else if (action === "delete") await boss.deleteJob(queue, ids);
else throw new Error(`unknown action ${action}`);
await boss.stop({ graceful: false, wait: true });
