"""llama.cpp's spec-decode counters (ggml-org/llama.cpp#26389): read like vLLM's, whichever suffix and position base."""

from __future__ import annotations

import numpy as np
import pytest

from specaccept_cli.errors import InputError
from specaccept_cli.read.engines import parse_engine_log, parse_prometheus_scrapes, sniff_engine_format

K = 3


def runs(seed: int, count: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    tests = rng.random((count, K)) <= 0.7
    return np.cumprod(tests, axis=1).sum(axis=1)


def scrape(accepted: np.ndarray, suffix: str, first_position: int) -> list[str]:
    """A /metrics scrape of a llama.cpp server after `accepted` runs of k = 3 drafts."""
    per_pos = [int((accepted > i).sum()) for i in range(K)]
    lines = [
        "# HELP llamacpp:prompt_tokens_total Number of prompt tokens processed.",
        "# TYPE llamacpp:prompt_tokens_total counter",
        "llamacpp:prompt_tokens_total 4096",
        f"# TYPE llamacpp:spec_decode_num_drafts{suffix} counter",
        f"llamacpp:spec_decode_num_drafts{suffix} {accepted.shape[0]}",
        f"llamacpp:spec_decode_num_draft_tokens{suffix} {accepted.shape[0] * K}",
        f"llamacpp:spec_decode_num_accepted_tokens{suffix} {int(accepted.sum())}",
    ]
    lines += [
        f'llamacpp:spec_decode_num_accepted_tokens_per_pos{suffix}{{position="{i + first_position}"}} {count}'
        for i, count in enumerate(per_pos)
    ]
    return lines


@pytest.mark.parametrize(("suffix", "first_position"), [("_total", 0), ("", 0), ("_total", 1)])
def test_two_llamacpp_scrapes_give_the_exact_histogram_between_them(suffix: str, first_position: int) -> None:
    before, during = runs(1, 500), runs(2, 800)
    lines = scrape(before, suffix, first_position) + scrape(np.concatenate([before, during]), suffix, first_position)
    assert sniff_engine_format(lines) == "prometheus"
    (interval,) = [item for item in parse_prometheus_scrapes(lines, "metrics.prom")]
    assert not isinstance(interval, InputError)
    assert interval.engine == "llama.cpp" and interval.fmt == "llamacpp-prometheus"
    assert interval.counts is not None
    assert interval.counts[K].tolist() == np.bincount(during, minlength=K + 1).tolist()


def test_llamacpp_counters_that_do_not_add_up_name_the_engine() -> None:
    lines = scrape(runs(3, 200), "_total", 0)
    lines[6] = "llamacpp:spec_decode_num_accepted_tokens_total 1"
    (error,) = list(parse_engine_log(lines, "metrics.prom", "prometheus"))
    assert isinstance(error, InputError) and "inconsistent llama.cpp counters" in error.message
