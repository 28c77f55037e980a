"""Text from producers and models is untrusted: strip what hides, escape what forges.

- `strip_invisible` drops control, format (zero-width, bidi, soft hyphen, tag)
  and other invisible characters. It runs before redaction, so
  `pass\u200bword=x` cannot slip past a pattern (docs/design.md, section 3).
- `escape_controls` shows control and format characters as `\\xNN`/`\\uNNNN` escapes
  for logs, CLI output and metric labels, so a CR/LF in a job id cannot forge
  a log line.
- `SafeFormatter` is a logging formatter that escapes every message it formats.

Both are `str.translate` over fixed tables: linear, no regular expression.
"""

from __future__ import annotations

import hashlib
import logging

# Unicode general category Cf (format), complete as of Unicode 15.1, plus
# invisible fillers, variation selectors and line/paragraph separators.
_FORMAT_RANGES: tuple[tuple[int, int], ...] = (
    (0x00AD, 0x00AD),
    (0x034F, 0x034F),
    (0x0600, 0x0605),
    (0x061C, 0x061C),
    (0x06DD, 0x06DD),
    (0x070F, 0x070F),
    (0x0890, 0x0891),
    (0x08E2, 0x08E2),
    (0x115F, 0x1160),
    (0x17B4, 0x17B5),
    (0x180B, 0x180F),
    (0x200B, 0x200F),
    (0x2028, 0x202E),
    (0x2060, 0x206F),
    (0x3164, 0x3164),
    (0xFE00, 0xFE0F),
    (0xFEFF, 0xFEFF),
    (0xFFA0, 0xFFA0),
    (0xFFF9, 0xFFFB),
    (0x110BD, 0x110BD),
    (0x110CD, 0x110CD),
    (0x13430, 0x1343F),
    (0x1BCA0, 0x1BCA3),
    (0x1D173, 0x1D17A),
    (0xE0000, 0xE007F),
    (0xE0100, 0xE01EF),
)
_CONTROL_RANGES: tuple[tuple[int, int], ...] = ((0x00, 0x08), (0x0B, 0x0C), (0x0E, 0x1F), (0x7F, 0x9F))


def _codepoints(ranges: tuple[tuple[int, int], ...]) -> list[int]:
    return [cp for low, high in ranges for cp in range(low, high + 1)]


_INVISIBLE = _codepoints(_FORMAT_RANGES) + _codepoints(_CONTROL_RANGES)
_STRIP_TABLE: dict[int, None] = dict.fromkeys(_INVISIBLE)
_ESCAPE_TABLE: dict[int, str] = {
    cp: (f"\\x{cp:02x}" if cp < 0x100 else f"\\u{cp:04x}" if cp < 0x10000 else f"\\U{cp:08x}")
    for cp in [*_INVISIBLE, 0x09, 0x0A, 0x0D]
}


def is_invisible(char: str) -> bool:
    """True for a character `strip_invisible` removes."""
    return ord(char) in _STRIP_TABLE


def strip_invisible(text: str) -> str:
    """Drop control (except tab, LF, CR), format and invisible characters."""
    return text.translate(_STRIP_TABLE)


def escape_controls(text: str) -> str:
    """Show every control/format character (CR, LF and tab included) as an escape."""
    return text.translate(_ESCAPE_TABLE)


def short_digest(text: str, hex_digits: int = 8) -> str:
    """First `hex_digits` hex digits of SHA-256 of `text` (UTF-8, surrogates escaped)."""
    data = text.encode("utf-8", errors="backslashreplace")
    return hashlib.sha256(data).hexdigest()[:hex_digits]


class SafeFormatter(logging.Formatter):
    """Escapes control characters in the message line, so untrusted text cannot forge log lines."""

    def formatMessage(self, record: logging.LogRecord) -> str:
        return escape_controls(super().formatMessage(record))
