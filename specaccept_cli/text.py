"""Making strings that came from data safe to show: no live control characters, no forged CI commands.

The GitHub Actions runner acts on two spellings of a command in any line of stdout or stderr
(actions/runner, src/Runner.Common/ActionCommand.cs): `TryParseV2` takes a line whose first
non-blank characters are `::` (`::add-mask::x`), and `TryParse` takes `##[` anywhere in a line
(`IndexOf("##[")`: `text ##[set-output name=x;]1`). Both compare culture-sensitively where the
runner uses ICU, so characters that collate as nothing (zero-width, format, variation selectors)
may sit between those characters and still match: the patterns below allow for them.

Data reaches four kinds of output, each with its own helper:
- text for people (stderr lines, Rich cells via `render.data_text`, markdown): `visible` makes
  control and invisible format characters visible and breaks a `##[` (`##\\x5b`); `safe_text`
  also defuses a leading `::` (`\\x3a:`), for text that may start a line;
- CSV cells: `csv_text`, controls visible and a leading `::` defused, `##[` kept (CSV has no escape
  that keeps the value: a CSV read by the runner is fenced instead, see `CommandFence`);
- JSON (`-o json`, `-o jsonl`): JSON escaping already covers C0 controls and newlines, and every line
  starts with `{` or spaces and a quote; `json_controls_escaped` also escapes the C1 controls, line
  separators and invisible format characters that JSON may carry raw, and `json_commands_escaped`
  writes a `##[` as `##\\u005b`: both decode to the very same strings;
- GitHub workflow commands that specaccept writes on purpose (`--github`): `workflow_command`, whose
  message and properties are percent-encoded the runner's way.

And numbers written against a threshold (`shown_threshold`, `shown_against`): the verdict's sentences
and every view show a gate with them, so they live here, below both.
"""

from __future__ import annotations

import os
import re
import stat

# Invisible characters that can hide or reorder text: C0 and C1 controls (ESC starts ANSI
# sequences), DEL, lone surrogates (a file name's bytes that are not UTF-8, see `shown_name`), and
# Unicode's format characters (category Cf: soft hyphen, the Arabic letter mark, zero-width and
# word-joining characters, bidirectional controls, invisible operators, the byte order mark,
# interlinear annotation, tag characters), plus the blank Hangul fillers and the combining grapheme
# joiner. The Cf characters that print a visible mark (the Arabic and Syriac number signs,
# U+0600-0605, U+06DD, U+070F, U+0890-0891, U+08E2, U+110BD, U+110CD) are kept.
_CONTROLS = "\\x00-\\x1f\\x7f-\\x9f\\ud800-\\udfff"
_FORMAT = (
    "\\xad\\u034f\\u061c\\u115f\\u1160\\u180e\\u200b-\\u200f\\u2028-\\u202e\\u2060-\\u206f\\u3164\\ufeff"
    "\\uffa0\\ufff9-\\ufffb\\U00013430-\\U0001343f\\U0001bca0-\\U0001bca3\\U0001d173-\\U0001d17a"
    "\\U000e0000-\\U000e007f"
)
_HIDING = _CONTROLS + _FORMAT
_CONTROL = re.compile(f"[{_HIDING}]")

# What a culture-sensitive comparison may skip between the characters of `##[` or `::`: the above
# and the variation selectors (kept in text, they are part of emoji).
_IGNORED = _HIDING + "\\ufe00-\\ufe0f\\U000e0100-\\U000e01ef"

# The runner's `##[` command prefix, anywhere in a line.
_RUNNER_PREFIX = re.compile(f"#[{_IGNORED}]*#[{_IGNORED}]*\\[")

# The runner's `::` command start: the first non-blank characters of a line (of any line of a text).
_WORKFLOW_COMMAND = re.compile(f"^([\\s{_IGNORED}]*):(?=[{_IGNORED}]*:)")
_WORKFLOW_LINE = re.compile(f"^[\\s{_IGNORED}]*:[{_IGNORED}]*:", re.MULTILINE)

# The characters above that JSON may carry raw (all but the C0 controls and DEL, which it escapes), as
# their UTF-8 bytes: searching the bytes skips text in other scripts at the speed of a byte search.
_RAW_IN_JSON = re.compile(
    rb"\xc2[\x80-\x9f\xad]|\xcd\x8f|\xd8\x9c"
    rb"|\xe1(?:\x85[\x9f\xa0]|\xa0\x8e)"
    rb"|\xe2(?:\x80[\x8b-\x8f\xa8-\xae]|\x81[\xa0-\xaf])"
    rb"|\xe3\x85\xa4"
    rb"|\xef(?:\xbb\xbf|\xbe\xa0|\xbf[\xb9-\xbb])"
    rb"|\xf0(?:\x93\x90[\xb0-\xbf]|\x9b\xb2[\xa0-\xa3]|\x9d\x85[\xb3-\xba])"
    rb"|\xf3\xa0[\x80\x81][\x80-\xbf]"
)
_RAW_LEADS = (b"\xc2", b"\xcd", b"\xd8", b"\xe1", b"\xe2", b"\xe3", b"\xef", b"\xf0", b"\xf3")  # their first bytes


def visible(text: str) -> str:
    """`text` as a harmless piece of a line: controls (ANSI escapes, newlines, carriage returns) and
    invisible format characters shown as escapes (\\x1b, \\u200b), and no `##[` command prefix (`##\\x5b`)."""

    return _unprefixed(_CONTROL.sub(_escape, text))


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    if 0xDC80 <= code <= 0xDCFF:  # a byte of a file name that is not UTF-8, as Python decodes it
        return f"\\x{code - 0xDC00:02x}"
    return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}" if code <= 0xFFFF else f"\\U{code:08x}"


_SURROGATE = re.compile("[\\ud800-\\udfff]")


def shown_name(name: str) -> str:
    """A file name as UTF-8 text for every output: a byte that is not UTF-8 (legal in a Linux file name,
    kept by Python as a lone surrogate) written `\\xff`, as stderr shows it; other names unchanged."""
    if name.isascii() or not _SURROGATE.search(name):
        return name
    return _SURROGATE.sub(_escape, name)


def _unprefixed(text: str) -> str:
    """`text` with every runner command prefix `##[` broken: its `[` written `\\x5b`."""
    if "#" not in text:
        return text
    return _RUNNER_PREFIX.sub(lambda match: match.group()[:-1] + "\\x5b", text)


def defused(text: str) -> str:
    """`text` unable to be a CI workflow command: a leading `::` becomes `\\x3a:`, a `##[` `##\\x5b`."""
    return _unprefixed(_unstarted(text))


def _unstarted(text: str) -> str:
    """`text` unable to start a line as a `::` workflow command: its leading `:` written `\\x3a`."""
    first = text.lstrip()[:1]
    if ":" not in text or (first != ":" and first.isascii()):  # the characters it may skip are not ASCII
        return text
    return _WORKFLOW_COMMAND.sub(lambda match: match.group(1) + "\\x3a", text, count=1)


def safe_text(value: object) -> str:
    """A value from the data as one harmless line of text: controls visible, no workflow command."""
    return defused(visible(value if isinstance(value, str) else str(value)))


def csv_text(value: str) -> str:
    """A string from the data as one CSV line's cell: controls visible, no leading `::`, a `##[` kept
    (CSV has no escape that keeps the value; a CSV the runner reads is fenced, see `CommandFence`)."""

    return _unstarted(_CONTROL.sub(_escape, value))


def json_controls_escaped(data: bytes) -> bytes:
    """JSON text with C1 controls, separators and invisible format characters written as \\uXXXX
    (a surrogate pair above U+FFFF): the same value decoded."""
    if data.isascii() or not any(lead in data for lead in _RAW_LEADS):
        return data
    return _RAW_IN_JSON.sub(_json_escape, data)


def _json_escape(match: re.Match[bytes]) -> bytes:
    code = ord(match.group().decode())
    if code <= 0xFFFF:
        return b"\\u%04x" % code
    code -= 0x10000
    return b"\\u%04x\\u%04x" % (0xD800 + (code >> 10), 0xDC00 + (code & 0x3FF))


def json_commands_escaped(data: bytes) -> bytes:
    """JSON text (`json_controls_escaped` applied) with the `[` of every `##[` written `\\u005b`: the
    same value decoded.

    Outside a string `#` is no JSON, and inside one it is never part of an escape, so a `##[`
    in JSON text is always inside a string, where `\\u005b` is the same `[`.
    """
    if b"#" not in data:
        return data
    if data.isascii():
        return data.replace(b"##[", b"##\\u005b")
    text = data.decode()
    return _RUNNER_PREFIX.sub(lambda match: match.group()[:-1] + "\\u005b", text).encode()


def runner_reads(descriptor: int) -> bool:
    """Whether the GitHub Actions runner reads what is written to `descriptor` as its log: in a job
    (GITHUB_ACTIONS=true) and not a regular file (`> out.csv` is a file the user named: its bytes
    stay as they are)."""
    if os.environ.get("GITHUB_ACTIONS") != "true":
        return False
    try:
        return not stat.S_ISREG(os.fstat(descriptor).st_mode)
    except OSError:
        return True


def holds_command(text: str) -> bool:
    """Whether some line of `text` would be a workflow command (see the module's docstring)."""
    if "#" in text and _RUNNER_PREFIX.search(text):
        return True
    return ":" in text and _WORKFLOW_LINE.search(text) is not None


class CommandFence:
    """CSV for the runner's log, which has no escape: the runner's own `::stop-commands::TOKEN` before
    the first line that would be a command, and `::TOKEN::` at the end, so nothing in between is acted
    on. The token is random, so the data cannot end the fence. Clean output is left without a fence.
    """

    def __init__(self) -> None:
        self.token: str | None = None

    def before(self, data: bytes) -> bytes:
        """The line to write before `data` (the fence's start, the first time `data` needs it)."""
        if self.token is not None or not holds_command(data.decode(errors="replace")):
            return b""
        self.token = os.urandom(16).hex()
        return b"::stop-commands::%s\n" % self.token.encode()

    def end(self) -> bytes:
        """The line that ends the fence, once (nothing when none was opened)."""
        token, self.token = self.token, None
        return b"" if token is None else b"::%s::\n" % token.encode()


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
