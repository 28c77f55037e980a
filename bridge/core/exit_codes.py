"""The exit codes of every `dlq-bridge` command, defined once.

`--help`, README.md and docs/operations.md list them from here
(tests/test_exit_codes.py keeps the docs in step).
"""

from __future__ import annotations

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_START = 3
EXIT_NOT_FOUND = 4

EXIT_CODES: dict[int, str] = {
    EXIT_OK: "ok",
    EXIT_FAILED: "failed: a check, a delivery or a Redis operation failed, or interrupted",
    EXIT_USAGE: "bad configuration or command line (one line per problem on stderr)",
    EXIT_START: "`run` could not start: the listen address is in use or cannot be bound, "
    "or the runtime failed to start (the log says why)",
    EXIT_NOT_FOUND: "not found: the named queue, job id or sink does not exist, or stdin is empty",
}


def exit_codes_help() -> str:
    """The `exit codes:` block of `--help`."""
    return "exit codes:\n" + "\n".join(f"  {code}  {text}" for code, text in EXIT_CODES.items())


def exit_codes_table() -> str:
    """The Markdown table of README.md and docs/operations.md."""
    rows = ["| code | meaning |", "|---|---|"]
    rows += [f"| {code} | {text} |" for code, text in EXIT_CODES.items()]
    return "\n".join(rows) + "\n"
