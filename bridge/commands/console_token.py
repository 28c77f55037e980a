"""`dlq-bridge console-token`: a new console role token, and the line to paste into the config.

The token is printed once, on stdout, for the person who will use it; the
config keeps only its SHA-256 (`[[console.auth.tokens]]`, bridge.console.auth).
Rotate a token by adding the new entry, handing the token out, then deleting
the old entry.
"""

from __future__ import annotations

import argparse
import hashlib
import re
import secrets

from bridge.config.console_auth import ROLES
from bridge.core.exit_codes import EXIT_OK
from bridge.settings import Settings

TOKEN_BYTES = 32
NAME = re.compile(r"^[A-Za-z0-9._@-]{1,64}$")  # RoleToken.name


def _name(value: str) -> str:
    if not NAME.fullmatch(value):
        raise argparse.ArgumentTypeError("1-64 of letters, digits and . _ @ -")
    return value


def add_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--role", choices=ROLES, default="viewer", help="the token's role (default: viewer)")
    parser.add_argument("--name", type=_name, default="ops", help="who uses it: the audit list's `who` (default: ops)")
    parser.epilog = """examples:
  dlq-bridge console-token --role operator --name alice

Prints the token (give it to alice; it is not stored anywhere) and the TOML
entry with its SHA-256 to add to the config under [console.auth]."""


def token_entry(role: str, name: str) -> tuple[str, str]:
    """A new token and its `[[console.auth.tokens]]` TOML entry."""
    token = secrets.token_urlsafe(TOKEN_BYTES)
    digest = hashlib.sha256(token.encode()).hexdigest()
    entry = f'[[console.auth.tokens]]\nname = "{name}"\nrole = "{role}"\nsha256 = "{digest}"\n'
    return token, entry


def run(_settings: Settings, args: argparse.Namespace) -> int:
    token, entry = token_entry(args.role, args.name)
    print(f"token (give it to {args.name}; shown once): {token}\n\n# add to the config:\n{entry}")
    return EXIT_OK
