"""Making strings that came from data safe to show: no live control characters, no forged CI commands."""

from __future__ import annotations

import re

_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")


def visible(text: str) -> str:
    """Control characters (ANSI escapes, newlines, carriage returns) shown as escapes, e.g. \\x1b."""

    def escape(match: re.Match[str]) -> str:
        char = match.group()
        code = ord(char)
        return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}"

    return _CONTROL.sub(escape, text)


def workflow_data(text: str) -> str:
    """A GitHub Actions workflow-command message: `%`, CR and LF percent-encoded (GitHub's rule, `%` first).

    The runner reads a command only at the start of a line, so with no raw line break
    left, nothing in `text` can start an annotation of its own; the remaining control
    characters are shown as escapes so they cannot rewrite the log line either.
    """
    encoded = text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")
    return visible(encoded)


def workflow_property(text: str) -> str:
    """A workflow-command property value (`title=...`): as data, plus `:` and `,`, which end a property."""
    return workflow_data(text).replace(":", "%3A").replace(",", "%2C")


def workflow_command(command: str, message: str, **properties: str) -> str:
    """`::command key=value,...::message`, every value and the message escaped."""
    props = ",".join(f"{key}={workflow_property(value)}" for key, value in properties.items())
    return f"::{command}{' ' + props if props else ''}::{workflow_data(message)}"
