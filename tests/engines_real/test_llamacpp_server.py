"""A real llama.cpp server (0c1e570, built by `make engines`) audited on every surface it writes.

Each run starts llama-server on 127.0.0.1 with two tiny GGUF models (tests/engines_real/llamacpp_models.py),
sends bounded greedy requests to /completion and /v1/completions, scrapes /metrics before and after, and
stops the server by its pid. specaccept must then read the same accepted and drafted tokens as the
server's own counters (/metrics, and each response's `timings.draft_n` / `draft_n_accepted`) from the log,
the scrapes and the responses; alpha exactly from LLAMA_TRACE's per-step lines; and every other surface's
bounds must hold that exact alpha. Skipped when the server is not built, except under CI=true.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest

from specaccept_cli.read.engines import EngineInterval, parse_engine_log
from tests.engines_real.llamacpp_models import write_models
from tests.engines_real.llamacpp_server import GGUF_PY, Capture, counter, require_build, run_server
from tests.helpers import invoke

DRAFT_MODEL = ["--spec-type", "draft-simple", "--spec-draft-n-max", "4"]
RUNS: dict[str, tuple[list[str], dict[str, str]]] = {
    "draft-default": (DRAFT_MODEL, {}),
    "draft-lv4": ([*DRAFT_MODEL, "-lv", "4"], {}),
    "draft-trace": ([*DRAFT_MODEL, "-lv", "4"], {"LLAMA_TRACE": "1"}),
    "ngram-simple-trace": (
        [
            "--spec-type",
            "ngram-simple",
            "--spec-ngram-simple-size-n",
            "1",
            "--spec-ngram-simple-size-m",
            "3",
            "--spec-ngram-simple-min-hits",
            "1",
            "-lv",
            "4",
        ],
        {"LLAMA_TRACE": "1"},
    ),
    "ngram-mod-trace": (
        [
            "--spec-type",
            "ngram-mod",
            "--spec-ngram-mod-n-match",
            "1",
            "--spec-ngram-mod-n-min",
            "1",
            "--spec-ngram-mod-n-max",
            "4",
            "-lv",
            "4",
        ],
        {"LLAMA_TRACE": "1"},
    ),
}
TRACED = [name for name, (_, env) in RUNS.items() if "LLAMA_TRACE" in env]


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    require_build()
    return write_models(tmp_path_factory.mktemp("gguf"), GGUF_PY)


@pytest.fixture(scope="module")
def captures(models: tuple[Path, Path], tmp_path_factory: pytest.TempPathFactory) -> dict[str, Capture]:
    """Each run once, on first use (a server start and its requests take seconds)."""
    return _Lazy(models, tmp_path_factory.mktemp("llama-runs"))  # type: ignore[return-value]


class _Lazy(dict[str, Capture]):
    def __init__(self, models: tuple[Path, Path], directory: Path) -> None:
        super().__init__()
        self.models, self.directory = models, directory

    def __missing__(self, name: str) -> Capture:
        args, env = RUNS[name]
        if "draft-simple" in args:
            args = ["-md", str(self.models[1]), *args]
        capture = run_server(self.models, self.directory / name, args, env)
        self[name] = capture
        return capture


def server_counts(capture: Capture) -> tuple[int, int, int]:
    """(accepted, drafted, verify steps) between the scrapes: the server's own counters."""
    return tuple(  # type: ignore[return-value]
        round(counter(capture.after, name) - counter(capture.before, name))
        for name in (
            "spec_decode_num_accepted_tokens_total",
            "spec_decode_num_draft_tokens_total",
            "spec_decode_num_drafts_total",
        )
    )


def timings_counts(capture: Capture) -> tuple[int, int]:
    """(accepted, drafted) summed over every response's timings (absent when nothing was drafted)."""
    timings = [body.get("timings", {}) for body in capture.bodies]
    return (
        sum(int(t.get("draft_n_accepted", 0)) for t in timings),
        sum(int(t.get("draft_n", 0)) for t in timings),
    )


def audit(*paths: Path) -> dict[str, Any]:
    result = invoke("audit", *map(str, paths), "-o", "json")
    assert result.exit_code == 0, result.output
    data: dict[str, Any] = orjson.loads(result.stdout)
    return data


def engine_totals(data: dict[str, Any]) -> tuple[int, int]:
    """(accepted, drafted) over the whole input: the exact intervals and the bounded ones."""
    return data["accepted_tokens"], data["drafted_tokens"]


@pytest.mark.parametrize("name", list(RUNS))
def test_every_surface_counts_what_the_server_counted(captures: dict[str, Capture], name: str) -> None:
    capture = captures[name]
    accepted, drafted, steps = server_counts(capture)
    assert drafted > 0 and 0 < accepted < drafted, f"{name}: nothing to audit ({accepted}/{drafted})"
    assert timings_counts(capture) == (accepted, drafted)
    log = audit(capture.log)
    assert log["engine"]["bad_lines"] == 0 and log["skipped_rows"] == 0
    assert engine_totals(log) == (accepted, drafted)
    assert log["engine"]["lines"] == len(capture.lines())
    scrapes = audit(capture.before, capture.after)
    assert engine_totals(scrapes) == (accepted, drafted) and scrapes["engine"]["formats"] == ["llamacpp-prometheus"]
    responses = audit(capture.responses)
    assert engine_totals(responses) == (accepted, drafted)
    if name in TRACED:
        assert log["runs"] == steps and log["engine"]["bounded_intervals"] == 0
    else:
        # the request lines' mean lengths pin the verify steps; alpha only bounded
        assert log["runs"] == steps and log["alpha"] is None and log["alpha_bounds"] is not None


@pytest.mark.parametrize("name", TRACED)
def test_trace_lines_give_alpha_exactly_and_every_other_surface_bounds_it(
    captures: dict[str, Capture], name: str
) -> None:
    capture = captures[name]
    log = audit(capture.log)
    alpha = log["alpha"]
    assert alpha is not None and 0.3 < alpha < 0.95, alpha
    steps = [line for line in capture.lines() if "| accepted " in line and line.endswith("draft tokens")]
    pairs = [tuple(map(int, line.rsplit("accepted", 1)[1].split("draft")[0].split("/"))) for line in steps]
    examined = sum(a + (1 if a < d else 0) for a, d in pairs)
    assert alpha == pytest.approx(sum(a for a, _ in pairs) / examined, abs=0, rel=1e-12)
    # Every other surface: the request lines without the trace lines, the statistics' last running total,
    # the scrapes, the responses.
    others = [line for line in capture.lines() if line not in set(steps)]
    requests = [
        item
        for item in parse_engine_log(others, "no-trace.log")
        if isinstance(item, EngineInterval) and item.fmt.startswith("llamacpp-request")
    ]
    assert requests and sum(item.accepted or 0 for item in requests) == server_counts(capture)[0]
    low = sum(item.accepted or 0 for item in requests) / sum(
        item.examined_bounds[1] for item in requests if item.examined_bounds
    )
    high = sum(item.accepted or 0 for item in requests) / sum(
        item.examined_bounds[0] for item in requests if item.examined_bounds
    )
    assert low <= alpha <= high
    stats = [
        item
        for item in parse_engine_log(capture.lines(), "s.log")
        if isinstance(item, EngineInterval) and item.fmt == "llamacpp-stats"
    ]
    assert stats, "-lv 4 prints the drafter's statistics after each request"
    last = stats[-1]
    assert (last.accepted, last.draft_tokens) == server_counts(capture)[:2]
    assert last.alpha_bounds is not None and last.alpha_bounds[0] <= alpha <= last.alpha_bounds[1]
    for surface in (audit(capture.before, capture.after), audit(capture.responses)):
        bounds = surface["engine"]["alpha_bounds_all_intervals"]
        assert bounds is not None and bounds[0] <= alpha <= bounds[1], (surface["engine"]["formats"], bounds, alpha)


def test_the_server_prints_its_counters_as_stringstream_doubles(captures: dict[str, Capture]) -> None:
    """server-task.cpp: `<< item.value` of a double at the default precision 6: whole numbers below 1e6 print
    exactly, so these runs' counters read exactly (a count of 1e6 or more would print as 1.00003e+06)."""
    capture = captures["draft-default"]
    text = capture.after.read_text()
    for name in ("spec_decode_num_draft_tokens_total", "spec_decode_num_accepted_tokens_total"):
        [line] = [line for line in text.splitlines() if line.startswith(f"llamacpp:{name} ")]
        assert line.split()[1].isdigit()
    assert 'llamacpp:spec_decode_num_accepted_tokens_per_pos_total{position="0"}' in text
