"""Making strings that came from data safe to show: no live control characters, no forged CI commands.

Data reaches three kinds of output, each with its own helper:
- text for people (stderr lines, CSV cells, Rich cells via `render.data_text`): `safe_text`, which
  makes control characters visible (`visible`) and defuses a leading `::` (`defused`);
- JSON (`-o json`, `-o jsonl`): JSON escaping already covers C0 controls and newlines, and every line
  starts with `{` or spaces and a quote; `json_controls_escaped` also escapes the C1 controls, line
  separators and bidi overrides that JSON may carry raw, which decodes to the very same strings;
- GitHub workflow commands that specaccept writes on purpose (`--github`): `workflow_command`, whose
  message and properties are percent-encoded the runner's way.

And numbers written against a threshold (`shown_threshold`, `shown_against`): the verdict's sentences
and every view show a gate with them, so they live here, below both.
"""

from __future__ import annotations

import re

# C0 and C1 controls (ESC starts ANSI sequences), DEL, line/paragraph separators, zero-width and
# bidirectional formatting characters (they can reorder or hide what a terminal shows).
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u200b-\u200f\u2028-\u202e\u2066-\u2069\ufeff]")

# A CI runner (GitHub Actions) reads a line whose first non-blank characters are `::` as a command.
_WORKFLOW_COMMAND = re.compile(r"^(\s*):")

# The UTF-8 encodings of the characters above that JSON may leave unescaped.
_RAW_IN_JSON = re.compile(rb"\xc2[\x80-\x9f]|\xe2\x80[\x8b-\x8f\xa8-\xae]|\xe2\x81[\xa6-\xa9]|\xef\xbb\xbf")


def visible(text: str) -> str:
    """Control characters (ANSI escapes, newlines, carriage returns) shown as escapes, e.g. \\x1b."""

    def escape(match: re.Match[str]) -> str:
        char = match.group()
        code = ord(char)
        return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}"

    return _CONTROL.sub(escape, text)


def defused(text: str) -> str:
    """`text` unable to start a line as a CI workflow command: a leading `::` becomes `\\x3a:`."""
    if not text.lstrip().startswith("::"):
        return text
    return _WORKFLOW_COMMAND.sub(lambda match: match.group(1) + "\\x3a", text, count=1)


def safe_text(value: object) -> str:
    """A value from the data as one harmless line of text: controls visible, no workflow command."""
    return defused(visible(value if isinstance(value, str) else str(value)))


def json_controls_escaped(data: bytes) -> bytes:
    """JSON text with C1 controls, separators and bidi overrides written as \\uXXXX (same value decoded)."""
    if b"\xc2" not in data and b"\xe2" not in data and b"\xef" not in data:
        return data
    return _RAW_IN_JSON.sub(lambda match: b"\\u%04x" % ord(match.group().decode()), data)


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


def shown_threshold(threshold: float) -> str:
    """A threshold as the user wrote it (its shortest exact form)."""
    short = format(threshold, "g")
    return short if float(short) == threshold else repr(threshold)


def shown_against(value: float, threshold: float, decimals: int = 4) -> str:
    """`value` with enough decimals that it never reads equal to a `threshold` it differs from.

    At least `decimals`, and at least as many as the threshold has, so rounding cannot carry the
    value across the threshold: against a gate of 0.5017, 0.501696 shows as 0.501696, not 0.5017.
    """
    written = shown_threshold(threshold)
    if "e" not in written and "." in written:
        decimals = max(decimals, len(written.split(".")[1]))

    def faithful(shown: str) -> bool:  # on the value's side of the threshold, and equal only if it is
        return (float(shown) < threshold) == (value < threshold) and (float(shown) != threshold or value == threshold)

    shown = f"{value:.{decimals}f}"
    while not faithful(shown) and decimals < 20:
        decimals += 1
        shown = f"{value:.{decimals}f}"
    return shown if faithful(shown) else repr(value)
