"""Operator commands (`check`, `peek`, `redrive`): one module per command.

Each module exposes `add_args(parser)` and `run(settings, args) -> int`;
`bridge.cli` registers them. Exit codes: 0 ok, 1 failed, 2 bad configuration
or usage.
"""
