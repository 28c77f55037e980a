"""Delivery: each sink drains its own durable queue at its own pace.

`supervisor` (DeliverySupervisor: every sink's worker, the outbox sweep and the queue monitor),
`sink_worker` (SinkWorker: take, deliver or group, ack), `dispatch` (Dispatcher: routing and the
final delivery of one item or group), `send` (Deliverer: one alert to one sink: ledger, paced
attempts, retries), `retry`, `resolve` (queueing a resolve), `redeliver` (retrying an
undeliverable record), `monitor` (queue depth and age), `orphans` (queues of sinks no longer
configured) and `assembly` (building the routes, groupers and workers from settings).
"""
