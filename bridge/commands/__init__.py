"""Operator commands, one module each: `check`, `peek`, `redrive`, `undeliverable`, `summarize`,
`send-test`, `console-token`, `config-reference` and `demo` (with `check_memory`, `gateway_probe`
and `common` as their helpers).

Each command module exposes `add_args(parser)` and `run(settings, args) -> int`; `bridge.cli`
registers them. Exit codes: `bridge.core.exit_codes`.
"""
