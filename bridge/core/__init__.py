"""The data that flows and what every layer shares: no I/O, no Redis.

`models` (DeadLetter, Summary, Alert, Notification), `errors` (the exception tree and
`REDIS_ERRORS`), `names` (how a key name is encoded, shown and routed), `metrics`, `health`,
`items` (sink-queue item ids), `resolves` (the Resolve item), `untrusted` and `urls` (showing
untrusted text and URLs safely), `exit_codes`, and the small loops every stage uses: `backoff`,
`periodic`, `offloop` (blocking work on threads under a deadline), `breaker` and `budget`.
"""
