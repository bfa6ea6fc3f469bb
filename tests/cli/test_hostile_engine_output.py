"""Server output with counts no server prints (10^29 tokens, 1.7e308, 23 digits, a million digits) and values
that are no counts: bad lines at their own line, failing the audit or skipped and counted, never a traceback."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from specaccept_cli.cli.ways_out import SKIP
from tests.helpers import invoke

GOOD_VLLM = (
    "INFO 11-30 13:00:01 [metrics.py:120] SpecDecoding metrics: Draft acceptance rate: 50.0%, "
    "Accepted: 150 tokens, Drafted: 300 tokens"
)
TEN_TO_29 = "1" + "0" * 29
LLAMA_23_DIGITS = "12345678901234567890123"

# (file name, its lines, the line that is bad, the message's words after "file:line: ")
CASES = [
    (
        "vllm.log",
        [GOOD_VLLM, GOOD_VLLM.replace("150", TEN_TO_29).replace("300", "2" + "0" * 29)],
        2,
        f"bad vLLM line: Accepted: {TEN_TO_29} is beyond 2**53, more than any server counts",
    ),
    (
        "vllm-million-digits.log",
        [GOOD_VLLM, GOOD_VLLM.replace("150", "9" * 1_000_000)],
        2,
        "bad vLLM line: Accepted: 999999999999... (1,000,000 digits) is beyond 2**53, more than any server counts",
    ),
    (
        "llama.log",
        [
            "slot print_timing: id  0 | task 52 | draft acceptance = 0.50000 (  100 accepted /   200 generated)",
            f"slot print_timing: id  0 | task 53 | draft acceptance = 0.50000 ( {LLAMA_23_DIGITS} accepted /"
            f" {2 * int(LLAMA_23_DIGITS)} generated)",
        ],
        2,
        f"bad llama.cpp line: accepted {LLAMA_23_DIGITS} is beyond 2**53, more than any server counts",
    ),
    (
        "llama-stats.log",
        [
            "slot print_timing: id  0 | task 52 | draft acceptance = 0.50000 (  100 accepted /   200 generated)",
            "statistics ngram_simple: #calls(b,g,a) = 1 2 3, #gen drafts = 4, #acc drafts = 2, "
            f"#gen tokens = {LLAMA_23_DIGITS}, #acc tokens = 5",
        ],
        2,
        f"bad llama.cpp statistics: {LLAMA_23_DIGITS} is beyond 2**53, more than any server counts",
    ),
]


def _prom(drafts: str, tokens: str, accepted: str) -> list[str]:
    return [
        "# TYPE vllm:spec_decode_num_drafts_total counter",
        f'vllm:spec_decode_num_drafts_total{{engine="0"}} {drafts}',
        "# TYPE vllm:spec_decode_num_draft_tokens_total counter",
        f'vllm:spec_decode_num_draft_tokens_total{{engine="0"}} {tokens}',
        "# TYPE vllm:spec_decode_num_accepted_tokens_total counter",
        f'vllm:spec_decode_num_accepted_tokens_total{{engine="0"}} {accepted}',
    ]


PROM_CASES = [
    (
        _prom("100.0", "1.7e308", "150.0"),
        4,
        "vLLM counter vllm:spec_decode_num_draft_tokens_total = 1.7e308 is beyond 2**53, more than any server counts"
        " ({engine='0'})",
    ),
    # A NaN in the first of two scrapes: named at its own line, not at the scrape that closes the interval.
    (
        [*_prom("100.0", "NaN", "150.0"), "", *_prom("200.0", "600.0", "300.0")],
        4,
        "vLLM counter vllm:spec_decode_num_draft_tokens_total = NaN is not a whole number ({engine='0'})",
    ),
    (
        [*_prom("100.0", "300.0", "150.0"), "", *_prom("200.0", "600.0", "2.5")],
        13,
        "vLLM counter vllm:spec_decode_num_accepted_tokens_total = 2.5 is not a whole number ({engine='0'})",
    ),
]


def _check(path: Path, line: int, said: str) -> None:
    failed = invoke("audit", str(path), "-o", "json")
    assert failed.exit_code == 2
    assert failed.stderr == f"specaccept: {path}:{line}: {said}; {SKIP}\n"  # and its way out (issue 43)
    assert failed.stdout == ""
    skipped = invoke("audit", str(path), "-o", "json", "--on-error", "skip")
    assert "Traceback" not in skipped.stderr
    data = orjson.loads(skipped.stdout)
    assert data["skipped_rows"] == 1
    assert data["errors"] == [{"source": str(path), "line": line, "message": said}]


@pytest.mark.parametrize(("name", "lines", "line", "said"), CASES, ids=[case[0] for case in CASES])
def test_a_count_beyond_what_a_server_counts_is_a_bad_line(
    tmp_path: Path, name: str, lines: list[str], line: int, said: str
) -> None:
    path = tmp_path / name
    path.write_text("\n".join(lines) + "\n")
    _check(path, line, said)


@pytest.mark.parametrize(("lines", "line", "said"), PROM_CASES, ids=["1.7e308", "nan-first-scrape", "fraction"])
def test_a_scrape_value_that_is_no_count_is_named_at_its_line(
    tmp_path: Path, lines: list[str], line: int, said: str
) -> None:
    path = tmp_path / "metrics.prom"
    path.write_text("\n".join(lines) + "\n")
    if line == 4 and "NaN" in said:  # two scrapes: one interval between them, and it is the bad one
        failed = invoke("audit", str(path), "-o", "json")
        assert failed.exit_code == 2
        assert failed.stderr == f"specaccept: {path}:{line}: {said}; {SKIP}\n"  # and its way out (issue 43)
        return
    _check(path, line, said)


def test_a_sglang_response_count_beyond_64_bits_is_a_bad_line(tmp_path: Path) -> None:
    good = {"meta_info": {"id": "a", "spec_verify_ct": 10, "spec_accept_token_num": 12, "spec_draft_token_num": 30}}
    bad = {"meta_info": {"id": "b", "spec_verify_ct": 10, "spec_accept_token_num": 12, "spec_draft_token_num": 30}}
    text = orjson.dumps(bad).decode().replace('"spec_accept_token_num":12', f'"spec_accept_token_num":{TEN_TO_29}')
    path = tmp_path / "responses.jsonl"
    path.write_text(orjson.dumps(good).decode() + "\n" + text + "\n")
    result = invoke("audit", str(path), "-o", "json")
    assert result.exit_code == 2
    assert result.stderr.startswith(f"specaccept: {path}:2: ")
    assert "spec_accept_token_num = 1e+29 is beyond 2**53, more than any server counts" in result.stderr


def test_the_intervals_of_a_scrape_are_made_one_at_a_time() -> None:
    """A scrape of many series: its intervals stream out (the scrape itself is held, to pair it with the next)."""
    import tracemalloc

    from specaccept_cli.read.engines import prometheus_intervals, read_prometheus_scrapes

    lines = []
    for engine in range(20_000):
        lines += [
            f'vllm:spec_decode_num_draft_tokens_total{{engine="{engine}"}} 300.0',
            f'vllm:spec_decode_num_accepted_tokens_total{{engine="{engine}"}} 150.0',
        ]
    (scrape,) = read_prometheus_scrapes(lines, "metrics.prom")
    tracemalloc.start()
    try:
        made = sum(1 for _ in prometheus_intervals(None, scrape, "metrics.prom"))
        streamed = tracemalloc.get_traced_memory()[1]
        tracemalloc.reset_peak()
        held = list(prometheus_intervals(None, scrape, "metrics.prom"))
        holding = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert made == len(held) == 20_000
    assert streamed < 0.6 * holding, (streamed, holding)
