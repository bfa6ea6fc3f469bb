"""'Exact' means exact: an engine line whose figures fit only if every draft had k tokens says so, and the
bounds over all intervals hold without that assumption, so they contain the truth."""

from __future__ import annotations

from pathlib import Path

import orjson

from specaccept_cli.read.engines.vllm import vllm_line
from specaccept_cli.summary.estimates import estimate
from specaccept_cli.summary.files import summary_from_object
from tests.helpers import invoke

# 2,664 drafts, 5 of them of 4 tokens and the rest of 5: Drafted 13,315 = 2,659 x 5 + 5 x 4, Accepted 6,515,
# examined 8,609, alpha 6,515 / 8,609 = 0.756766. Read as 2,663 full drafts, it is "exactly" 0.756678.
LINE = (
    "INFO 12-01 10:00:00 [metrics.py:100] SpecDecoding metrics: Mean acceptance length: 3.45, Accepted throughput: "
    "651.50 tokens/s, Drafted throughput: 1331.50 tokens/s, Accepted: 6515 tokens, Drafted: 13315 tokens, "
    "Per-position acceptance rate: 0.816, 0.631, 0.461, 0.324, 0.213, Avg Draft acceptance rate: 48.9%"
)
TRUE_ALPHA = 6515 / 8609


def test_the_line_is_exact_only_under_the_assumption_and_its_bounds_hold_without() -> None:
    interval = vllm_line("server.log", 1, LINE, k=None, assume_full_drafts=True)
    assert not isinstance(interval, Exception)
    assert interval.drafts == 2663 and interval.alpha is not None and interval.alpha != TRUE_ALPHA
    assert interval.assumes_full_drafts and interval.to_dict()["assumes_full_drafts"] is True
    assert interval.unassumed_alpha_bounds is not None
    low, high = interval.unassumed_alpha_bounds
    assert low <= TRUE_ALPHA <= high and low <= interval.alpha <= high
    # Where the engine line leaves no choice (Drafted not a multiple of k) nothing is assumed.
    other = LINE.replace("Drafted: 13315", "Drafted: 13314").replace("48.9%", "48.9%")
    loose = vllm_line("server.log", 1, other, k=None, assume_full_drafts=True)
    assert not isinstance(loose, Exception) and not loose.assumes_full_drafts


def test_audit_shows_the_assumption_and_bounds_that_contain_the_truth(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    log.write_text("INFO starting the server\n" + LINE + "\n")
    data = orjson.loads(invoke("audit", str(log), "-o", "json").stdout)
    engine = data["engine"]
    assert engine["assumes_full_drafts"] is True and engine["assumed_full_draft_intervals"] == 1
    low, high = engine["alpha_bounds_all_intervals"]
    assert low <= TRUE_ALPHA <= high and low <= data["alpha"] <= high
    again = summary_from_object(data)  # the assumption survives a saved summary, and so do the bounds
    assert again.engine is not None and again.engine.assumed == 1
    identified = estimate(again).identified
    assert identified is not None and identified.alpha_bounds == (low, high)
    markdown = invoke("audit", str(log), "-o", "markdown").stdout
    assert "| assumes full drafts | 1 | intervals exact only if every draft had k tokens" in markdown
