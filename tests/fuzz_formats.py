"""Fuzz target over the other readers: engine output lines, Prometheus scrapes (files and `watch` pages) and
per-request payloads. `make fuzz` runs it after the JSONL target (`tests/fuzz_reader.py`); `make test` runs a
short profile (`tests/read/test_fuzz_formats.py`).

Inputs are arbitrary bytes and near-valid lines built from the engines' own format strings (the fixtures in
`tests/engines.py` and `tests/payloads.py`, cut, spliced and with their numbers swapped for hostile ones).
Each reader is checked as `audit` and `watch` use it:
- `check_lines(data, fmt)`: the line loop of that format: every item is an interval, a request or an
  `InputError` naming a line of the input, never an exception; every line is counted once (`tally.lines`),
  and for engine output each line is a metrics line, an ignored one, a bad one or a repeat of a recent one.
- `check_page(data)`: a `/metrics` body as `watch` reads it: intervals or errors, never an exception.
- `check_command(data, fmt)`: `specaccept audit FILE --format fmt` in this process: exit status 0, 1 or 2,
  never an exception (CliRunner re-raises one), with `--on-error skip` and without.

    FUZZ_EXAMPLES=2000 .venv/bin/python -m tests.fuzz_formats
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from specaccept_cli.errors import InputError

ENGINE_FORMATS = ("auto", "vllm-log", "sglang-log", "sglang-requests", "llamacpp-log", "prometheus")
PAYLOAD_FORMATS = ("vllm-payload", "trtllm-payload", "sglang-payload", "llamacpp-payload", "aiperf-records")
SOURCE = "fuzz.log"


def _lines(data: bytes) -> list[bytes]:
    lines = data.split(b"\n")
    return lines[:-1] if lines and lines[-1] == b"" else lines


def _check_error(item: InputError, count: int) -> None:
    assert item.source == SOURCE and item.message, item
    assert item.line is None or 1 <= item.line <= count, (item.line, count)


def check_lines(data: bytes, fmt: str) -> None:
    """One format's reader over the lines of `data`: items or errors at real lines, every line counted."""
    lines = _lines(data)
    if fmt in PAYLOAD_FORMATS or fmt == "payload-auto":
        from specaccept_cli.read.payloads import RequestRecord, parse_payloads

        parse = parse_payloads(lines, SOURCE, "auto" if fmt == "payload-auto" else fmt)
        for item in parse:
            if isinstance(item, InputError):
                _check_error(item, len(lines))
            else:
                number, record = item
                assert 1 <= number <= len(lines) and isinstance(record, RequestRecord)
                record.runs()  # what the pipeline lays out: bounded by what the payload holds
        assert parse.tally.lines == len(lines)
        return
    from specaccept_cli.read.engines import EngineInterval, parse_engine_log

    engine = parse_engine_log(lines, SOURCE, fmt)
    for found in engine:
        if isinstance(found, InputError):
            _check_error(found, len(lines))
        else:
            assert isinstance(found, EngineInterval)
    tally = engine.tally
    assert tally.lines == len(lines), (tally, len(lines))
    if fmt in ("vllm-log", "sglang-log"):  # one interval, or one error, or nothing, or a repeat, per line
        assert tally.metrics + tally.ignored + tally.bad + tally.duplicates == tally.lines, tally


def check_page(data: bytes) -> None:
    """A scraped page, as `watch` reads each one: intervals or errors, never an exception."""
    from specaccept_cli.read.engines.prometheus import ScrapeSeries
    from specaccept_cli.rule.intervals import LineTally

    series = ScrapeSeries()
    for page in (data, data):  # twice: the second scrape is compared with the first
        tally = LineTally()
        for item in series.add(page.split(b"\n"), "http://127.0.0.1/metrics", tally):
            if isinstance(item, InputError):
                assert item.message
        assert tally.lines == len(page.split(b"\n"))


def check_command(data: bytes, fmt: str, directory: Path) -> None:
    """The whole command on `data`: exit status 0, 1 or 2 and never an exception, failing or skipping."""
    from click.testing import CliRunner

    from specaccept_cli.cli import cli

    path = directory / "input.log"
    path.write_bytes(data)
    for policy in ("fail", "skip"):
        args = ["audit", str(path), "--format", fmt, "--on-error", policy, "-o", "json"]
        result = CliRunner().invoke(cli, args, catch_exceptions=False)
        assert result.exit_code in (0, 1, 2), (result.exit_code, result.output)
        assert "Traceback" not in result.stderr


def seed_lines() -> list[bytes]:
    """Real lines of every format (the engines' format strings, through the test fixtures), to mutate."""
    import orjson

    from tests.engines import counters, llama_perpos_line, prom_text, server_log, sglang_meta, simulate
    from tests.payloads import (
        aiperf_record,
        llamacpp_completion,
        requests,
        sglang_generate,
        sse,
        trtllm_response,
        vllm_response,
    )

    lengths, accepted = simulate(5, 60, 4, 0.7)
    lines: list[bytes | str] = [*server_log(5, 3, 4, 0.7, runs=50), *prom_text(counters(lengths, accepted, 4))]
    lines.append(llama_perpos_line(240, 150, 60, [50, 40, 35, 25]))
    lines.append(orjson.dumps({"meta_info": sglang_meta(5, 30, 4, 0.7, "r1")[0]}))
    # SGLang's decode log line, scheduler_metrics_mixin.py (`accept len: {:.2f}, `)
    lines.append(
        "[2025-03-05 10:21:07 TP0] Decode batch. #running-req: 4, #token: 5821, token usage: 0.03, accept len: 3.24, "
        "gen throughput (token/s): 80.12, #queue-req: 0, "
    )
    lines += [
        b"slot print_timing: id  0 | task 52 | draft acceptance = 0.50000 (  100 accepted /   200 generated)",
        b"sglang:spec_accept_length 1e23",
        b"sglang:spec_num_steps 3",
        b"{",
        b'{"vllm:spec_decode_num_drafts_total"} 3',
    ]

    for request in requests(seed=7, count=3):
        for make in (vllm_response, trtllm_response, sglang_generate, llamacpp_completion, aiperf_record):
            lines.append(orjson.dumps(make(request)))
        lines += sse([vllm_response(request, stream=True)]).split(b"\n")
    lines.append(b'{"spec_decode_acceptance": {"acceptance_histogram": {"0": 1, "1000000000": 1}}}')
    lines.append(b"\xef\xbb\xbf" + orjson.dumps(vllm_response(requests(seed=8, count=1)[0])))
    return [line if isinstance(line, bytes) else line.encode() for line in lines]


HOSTILE_NUMBERS = [b"1e23", b"NaN", b"-1", b"1" + b"0" * 30, b"2.5", b"9" * 400, b"0", b"", b"\x00"]


def strategies():  # type: ignore[no-untyped-def]
    """Hypothesis strategies of inputs: bytes, and seed lines cut, spliced, and with numbers swapped."""
    import re

    from hypothesis import strategies as st

    seeds = seed_lines()
    number = re.compile(rb"\d+(?:\.\d+)?")

    def swapped(line: bytes, which: int, value: bytes) -> bytes:
        found = list(number.finditer(line))
        if not found:
            return line
        match = found[which % len(found)]
        return line[: match.start()] + value + line[match.end() :]

    seed = st.sampled_from(seeds)
    mutated = (
        seed
        | st.tuples(seed, st.integers(0, 400)).map(lambda pair: pair[0][: pair[1]])
        | st.tuples(seed, st.integers(0, 40), st.sampled_from(HOSTILE_NUMBERS)).map(lambda t: swapped(*t))
        | st.tuples(seed, st.binary(max_size=8), st.integers(0, 400)).map(
            lambda t: t[0][: t[2]] + t[1] + t[0][t[2] + len(t[1]) :]
        )
        | st.binary(max_size=80)
    )
    return st.lists(mutated, max_size=12).map(b"\n".join) | st.binary(max_size=400)


def main() -> None:
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    examples = int(os.environ.get("FUZZ_EXAMPLES", "20000"))
    formats = st.sampled_from([*ENGINE_FORMATS, *PAYLOAD_FORMATS, "payload-auto"])

    @settings(max_examples=examples, deadline=None, suppress_health_check=list(HealthCheck))
    @given(data=strategies(), fmt=formats)
    def fuzz_lines(data: bytes, fmt: str) -> None:
        check_lines(data, fmt)

    @settings(max_examples=max(1, examples // 4), deadline=None, suppress_health_check=list(HealthCheck))
    @given(data=strategies())
    def fuzz_pages(data: bytes) -> None:
        check_page(data)

    commands = max(1, examples // 40)  # a command is about 20 ms: the readers above take the bulk

    @settings(max_examples=commands, deadline=None, suppress_health_check=list(HealthCheck))
    @given(data=strategies(), fmt=st.sampled_from([*ENGINE_FORMATS, *PAYLOAD_FORMATS, "auto"]))
    def fuzz_commands(data: bytes, fmt: str) -> None:
        with tempfile.TemporaryDirectory() as directory:
            check_command(data, fmt, Path(directory))

    fuzz_lines()
    fuzz_pages()
    fuzz_commands()
    pages = max(1, examples // 4)
    print(f"fuzz: {examples} inputs to the line readers, {pages} pages, {commands} commands: no failure")


if __name__ == "__main__":
    main()
