"""Dead-letter sources behind one port (`source.Source`): the `dead_letter:*` lists (`redis_list`,
`tracking`) and seven other kinds: `sidekiq`, `bullmq`, `rq`, `dramatiq_xq` (watched stores, never changed:
`watched`, `leaving`), `redis_stream`, `rabbitmq` and `sqs`. `kinds` is a reader's contract,
`kind_port` puts a reader behind the port, `kind_registry`/`kind_plugin`/`builders`/`build` list and build
the kinds, `kind_settings` their tables, `mapping` their records' fields, `refs` what commands
and the console say about them.
"""
