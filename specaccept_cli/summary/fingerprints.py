"""Fingerprints of the acceptance mode: evidence, from the summary alone, that the exact rule was not at work.

Each fingerprint is a test with a stated false-alarm bound, not a guess; a seeded study (tests/summary/
test_fingerprints.py) runs each on ordinary logs (requests of varying difficulty, sampled drafts) and finds
none there.

- `synthetic_acceptance`: the server decided acceptance without comparing draft and target.
  vLLM's `rejection_sample_method: synthetic` (vllm/config/speculative.py) takes either a length target
  `synthetic_acceptance_length` L, resolved to the minimum-variance schedule `[1.0] * int(L - 1) + [frac] +
  [0.0] * ...` of unconditional per-position rates, so every run accepts floor(L - 1) or floor(L - 1) + 1
  tokens; or explicit `synthetic_acceptance_rates`, the same distribution of accepted lengths for every
  request. SGLang's `SGLANG_SIMULATE_ACC_LEN` and TensorRT-LLM's `TLLM_SPEC_DECODE_FORCE_NUM_ACCEPTED_TOKENS`
  force lengths the same way. Two tests: (a) accepted lengths confined to two adjacent values m, m + 1 with
  0 < m + 1 < k (or one value strictly inside), which an exact rule with these drafts would produce with
  probability below 1e-12 under the i.i.d. model fitted to the same runs; (b) with per-request clusters,
  no between-request variation: the dispersion of request totals is what identical requests give
  (chi-square p > HOMOGENEOUS_P over at least MIN_REQUESTS requests), where real prompts make requests easy
  or hard as a whole. (b) is absence of evidence unless the log could have shown the variation: it fires
  only when the dispersion test had power of at least MIN_POWER to reject identical requests if their alphas
  spread with a standard deviation of SPREAD_SD (see `spread_power`), so a few large requests can show it
  and many small ones may not; requests of one run carry no such power at all.
- `greedy_draft`: q = 1 for every logged token: the draft's probabilities are one-hot (vLLM's default
  `draft_sample_method: greedy`), so the rule reduces to r <= p, the table's `greedy-draft` rule
  (`rule/registry.py`): the engine's design, lossless when a rejection resamples from the target without
  the rejected token. Alpha then measures the target's probability of the draft's argmax; sampling from
  the draft is not being exercised.
- `lossy_acceptance`: with a reported count (`--reported-field`), runs whose server kept more tokens than
  the exact rule allows given their r, beyond what the known counting bugs and near ties explain: the
  server accepted tokens the rule rejects, as the table's lossy rules do (`typical`, `tree-target-cdf`
  with a threshold below 1), so its output does not follow the target distribution.

`synthetic_acceptance` measures nothing: the accepted lengths are configured, not decided by the models.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import numpy as np
from msgspec import Struct

from specaccept_cli.summary.probability import chi2_sf, chi2_upper_quantile

if TYPE_CHECKING:
    from specaccept_cli.summary.state import Summary

SYNTHETIC = "synthetic_acceptance"
GREEDY = "greedy_draft"
LOSSY = "lossy_acceptance"

MIN_RUNS = 200  # a row of the histogram needs this many runs before its shape is evidence
CONFINED_P = 1e-12  # test (a): the i.i.d. probability below which two-valued lengths are not chance
# test (b): the fewest requests, and runs, the dispersion test is run on; its power decides the rest. Five is the
# study's smallest case (tests/study: 5 requests of 20-2,000 runs); the tail is the exact chi-square's.
MIN_REQUESTS = 5
MIN_REQUEST_RUNS = MIN_RUNS
# Fires when p exceeds this: logs of identical requests (synthetic rates) show it 99% of the time; the power
# gate below holds the false alarms on real spread to 1 - MIN_POWER at most.
HOMOGENEOUS_P = 0.01
# The between-request spread of alpha that real prompts give, and the power (b) needs to see it. 0.05 is
# conservative: Leviathan et al. (2023, "Fast Inference from Transformers via Speculative Decoding", table 3)
# measure alpha 0.62-0.75 for one draft/target pair over tasks, so a task mix spreads more than that, and
# prompts within a task differ again; tests/study draws request alphas from Beta(7, 3) (SD 0.14).
SPREAD_SD = 0.05
MIN_POWER = 0.95
MIN_TOKENS = 100  # greedy_draft: logged tokens needed


class Fingerprint(Struct, frozen=True):
    """A pattern the summary shows (its code) and the evidence for it, in words."""

    code: str
    evidence: str

    def to_dict(self) -> dict[str, Any]:
        return {"code": self.code, "evidence": self.evidence}


def fingerprints(summary: Summary) -> tuple[Fingerprint, ...]:
    """Every fingerprint the summary shows, in a fixed order."""
    found = [_confined_lengths(summary), _homogeneous_requests(summary), _greedy(summary), _lossy(summary)]
    seen: set[str] = set()
    out = []
    for item in found:
        if item is not None and item.code not in seen:
            seen.add(item.code)
            out.append(item)
    return tuple(out)


def _iid_probabilities(alpha: float, k: int) -> list[float]:
    """P(a) for a = 0..k under the i.i.d. model with per-token acceptance alpha."""
    return [alpha**a * (1 - alpha) for a in range(k)] + [alpha**k]


def _confined_lengths(summary: Summary) -> Fingerprint | None:
    counts = summary.counts
    for k in range(2, counts.shape[0]):
        row = counts[k, : k + 1]
        runs = int(row.sum())
        if runs < MIN_RUNS:
            continue
        values = np.flatnonzero(row)
        low, high = int(values[0]), int(values[-1])
        single = low == high and 0 < low < k
        pair = high == low + 1 and high < k
        if not (single or pair):
            continue  # spread out, or piled at the top (a draft that is nearly always right) or at 0
        accepted = int((np.arange(k + 1) * row).sum())
        examined = int((np.minimum(np.arange(k + 1) + 1, k) * row).sum())
        alpha = accepted / examined
        probabilities = _iid_probabilities(alpha, k)
        inside = sum(probabilities[low : high + 1])
        log_p = runs * math.log(inside) if inside > 0 else -math.inf
        if log_p >= math.log(CONFINED_P):
            continue
        mean_length = 1 + accepted / runs
        lengths = f"{low}" if low == high else f"{low} or {high}"
        return Fingerprint(
            SYNTHETIC,
            f"all {runs:,} runs with k = {k} accepted {lengths} tokens (mean acceptance length {mean_length:.3f}): "
            f"the minimum-variance schedule of a synthetic length target (vLLM rejection_sample_method: synthetic, "
            f"SGLANG_SIMULATE_ACC_LEN, TLLM_SPEC_DECODE_FORCE_NUM_ACCEPTED_TOKENS); the exact rule with alpha "
            f"{alpha:.3f} gives that with probability 10^{log_p / math.log(10):.0f}; synthetic acceptance "
            "measures nothing about the models",
        )
    return None


class Dispersion(Struct, frozen=True):
    """Test (b): the chi-square of request totals against identical requests, and its power (`spread_power`)."""

    statistic: float
    freedom: int  # requests - 1
    p_value: float
    power: float

    @property
    def requests(self) -> int:
        return self.freedom + 1

    @property
    def powered(self) -> bool:
        """Whether silence (p above HOMOGENEOUS_P) is evidence: the test could have seen real prompts' spread."""
        return self.power >= MIN_POWER


def dispersion(summary: Summary) -> Dispersion | None:
    """Test (b) on a summary clustered by request; None without clusters, or below MIN_REQUESTS requests or
    MIN_REQUEST_RUNS runs, or when every run accepted alike."""
    tally = summary.clusters
    if tally is None or summary.runs < MIN_REQUEST_RUNS:
        return None
    sums = tally.sums
    if len(sums) < MIN_REQUESTS:
        return None
    counts = summary.counts
    _, a = np.indices(counts.shape)
    runs = counts.sum()
    mean = float((a * counts).sum() / runs)
    variance = float(((a - mean) ** 2 * counts).sum() / runs)
    if variance <= 0:
        return None
    n = sums.runs.astype(np.float64)
    keep = n > 0
    accepted = sums.accepted.astype(np.float64)[keep]
    n = n[keep]
    statistic = float((((accepted - n * mean) ** 2) / (n * variance)).sum())
    freedom = int(keep.sum()) - 1
    if freedom <= 0:
        return None
    power = spread_power(summary, n, variance)
    return Dispersion(statistic, freedom, chi2_sf(statistic, freedom), power)


def _homogeneous_requests(summary: Summary) -> Fingerprint | None:
    """Request totals no more dispersed than identical requests give, where the test had the power to see more."""
    test = dispersion(summary)
    if test is None or not test.powered or test.p_value <= HOMOGENEOUS_P:
        return None  # unpowered: the test could not have seen real prompts' spread, so its silence is no evidence
    return Fingerprint(
        SYNTHETIC,
        f"{test.requests:,} requests vary no more than identical requests would (dispersion chi-square "
        f"{test.statistic:.1f} on {test.freedom} degrees of freedom, p = {test.p_value:.2f}; the test had power "
        f"{test.power:.3f} to see request alphas spread with SD {SPREAD_SD:g}): every request had the same "
        "acceptance distribution, as fixed synthetic acceptance rates give (vLLM synthetic_acceptance_rates); "
        "real prompts make requests easier or harder for the draft",
    )


def spread_power(summary: Summary, runs_per_request: np.ndarray[Any, Any], variance: float) -> float:
    """The chance that the dispersion test rejects identical requests (p <= HOMOGENEOUS_P) when request
    alphas spread with SD SPREAD_SD around the log's alpha.

    A request of n runs then has accepted total variance n s_w^2 + n^2 m'^2 tau^2 (m' the slope of the
    i.i.d. model's mean accepted per run in alpha, over the log's draft lengths; tau = SPREAD_SD), while the
    test divides by n times the pooled per-run variance s^2 = s_w^2 + m'^2 tau^2: each request's term is
    inflated by lambda_g = (n - 1) m'^2 tau^2 / s^2. With shares h_g = n_g / N the statistic is about
    sum (1 + lambda_g)(1 - h_g) chi-square(1) terms: mean sum (1 + lambda_g)(1 - h_g), variance about
    2 sum (1 + lambda_g)^2, taken as a scaled chi-square c chi-square(nu) of that mean and variance
    (Satterthwaite), which keeps the skew a handful of requests give. One-run requests have lambda = 0: the
    pooled variance already holds the spread between them, and the power is the test's size.
    """
    examined = summary.examined_tokens
    if not examined:
        return 0.0
    alpha = summary.accepted_tokens / examined
    by_k = summary.runs_by_k.astype(np.float64)
    total = float(by_k.sum())
    if total <= 0:
        return 0.0
    # d/d alpha of E[accepted | k] = sum_{j <= k} alpha^j: sum_{j <= k} j alpha^(j - 1)
    positions = np.arange(1, by_k.shape[0], dtype=np.float64)
    per_position = positions * alpha ** (positions - 1)
    slope = float((by_k[1:] * np.cumsum(per_position)).sum() / total)
    lam = (runs_per_request - 1.0) * slope * slope * SPREAD_SD * SPREAD_SD / variance
    shares = runs_per_request / runs_per_request.sum()
    freedom = runs_per_request.shape[0] - 1
    if freedom <= 0:
        return 0.0
    mean = float(((1.0 + lam) * (1.0 - shares)).sum())
    spread = 2.0 * float(((1.0 + lam) ** 2).sum())
    scale, shape = spread / (2.0 * mean), 2.0 * mean * mean / spread
    return chi2_sf(chi2_upper_quantile(HOMOGENEOUS_P, freedom) / scale, shape)


def _greedy(summary: Summary) -> Fingerprint | None:
    one_hot = summary.one_hot_draft_tokens
    sampled = summary.sampled_tokens
    if one_hot is None or sampled < MIN_TOKENS or one_hot != sampled:
        return None
    return Fingerprint(
        GREEDY,
        f"q = 1 for all {sampled:,} logged draft tokens: the draft's probabilities are one-hot (vLLM's default "
        "draft_sample_method: greedy), so the rule reduces to r <= p (greedy-draft, the engine's design); alpha is "
        "the target's probability of the draft's choice, and sampling from the draft distribution is not exercised",
    )


def _lossy(summary: Summary) -> Fingerprint | None:
    tally = summary.reported
    if tally is None or not tally.mismatches:
        return None
    over = sum(runs for (recomputed, reported), runs in tally.pairs.items() if reported > recomputed)
    counting = tally.explains.get("no-prefix-break", 0) + tally.explains.get("bonus-counted", 0)
    unexplained = over - counting - (tally.near_ties or 0)
    if unexplained <= 0:
        return None
    return Fingerprint(
        LOSSY,
        f"{unexplained:,} of {tally.runs:,} runs report more kept tokens than the exact rule allows with their r, "
        "beyond the known counting bugs and near ties: the server accepted tokens the rule rejects (a lossy rule: "
        "typical acceptance, or tree-target-cdf with a threshold below 1), so its output does not follow the "
        "target distribution",
    )
