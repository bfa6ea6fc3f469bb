"""Estimates: everything the tool reports about a `Summary`, computed once into a typed, frozen object.

The state (`summary.state`) only counts; this module turns the counts into rates,
intervals and model checks. `estimate(summary)` is called once per summary that a
view or a check needs (groups only when they are shown or written), so no number
is recomputed on every read.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from specaccept_cli.rule.vectorized import THRESHOLD_SCALE
from specaccept_cli.summary import formulas
from specaccept_cli.summary.conventions import engine_conventions
from specaccept_cli.summary.state import Summary

Z_95 = 1.959963984540054  # two-sided 95% normal quantile
CONSISTENT_Z = 3.0  # |observed - predicted| / standard error above this: the i.i.d. model does not explain the logs


@dataclass(frozen=True)
class PositionRate:
    """Draft position j (1-based): drafts = runs with k >= j; reached = runs that tested token j
    (a >= j - 1 and k >= j); accepted = runs that kept it (a >= j).

    rate = accepted / reached is the conditional rate (EAGLE's); unconditional_rate = accepted / drafts
    is accepted at j over the runs that drafted position j.
    """

    position: int
    drafts: int
    reached: int
    accepted: int
    rate: float | None
    unconditional_rate: float | None


@dataclass(frozen=True)
class IidCheck:
    """Observed minus predicted tokens per pass, in standard errors of the observed mean (over runs)."""

    difference: float
    standard_error: float
    z: float | None  # None when the standard error is 0 and the difference is not
    consistent: bool


@dataclass(frozen=True)
class Estimates:
    """The numbers of one summary (None where there is nothing to estimate from)."""

    runs: int
    drafted_tokens: int
    accepted_tokens: int
    examined_tokens: int
    emitted_tokens: int
    alpha: float | None  # maximum-likelihood per-token acceptance: accepted / examined
    alpha_standard_error: float | None
    alpha_ci: tuple[float, float] | None
    expected_alpha: float | None  # mean of min(1, p/q) over drafted tokens with a logged (p, q): r-free
    acceptance_rate: float | None  # accepted / drafted: what vLLM reports; biased low as an estimate of alpha
    mean_accepted: float | None
    tokens_per_pass: float | None  # (accepted + runs) / runs
    tokens_per_pass_standard_error: float | None
    tokens_per_pass_predicted: float | None
    iid_check: IidCheck | None
    per_position: tuple[PositionRate, ...]
    accepted_histogram: dict[str, int]  # runs by accepted length, "0" .. str(max_k), zeros included
    conventions: dict[str, dict[str, Any]]  # what each engine would report on these runs

    def speedup(self, cost_ratio: float) -> float | None:
        """Observed walltime improvement: sum(a + 1) / sum(k c + 1) over runs."""
        if not self.runs:
            return None
        return self.emitted_tokens / (self.drafted_tokens * cost_ratio + self.runs)

    def optimal_k(self, cost_ratio: float) -> int | None:
        """The k in 1..32 the i.i.d. model at the estimated alpha finds fastest."""
        return None if self.alpha is None else formulas.optimal_k(self.alpha, cost_ratio)


def estimate(summary: Summary) -> Estimates:
    """Every estimate of `summary`, computed once."""
    runs = summary.runs
    drafted, accepted, examined = summary.drafted_tokens, summary.accepted_tokens, summary.examined_tokens
    alpha = accepted / examined if examined else None
    sum_aa, sum_ee, sum_ae = summary.run_moments()
    alpha_error = _alpha_standard_error(runs, examined, alpha, sum_aa, sum_ee, sum_ae)
    tokens_per_pass = (accepted + runs) / runs if runs else None
    tokens_error = _mean_standard_error(runs, accepted, sum_aa)
    predicted = _tokens_per_pass_predicted(summary, alpha)
    positions = _per_position(summary)
    sampled = summary.sampled_tokens
    return Estimates(
        runs=runs,
        drafted_tokens=drafted,
        accepted_tokens=accepted,
        examined_tokens=examined,
        emitted_tokens=accepted + runs,
        alpha=alpha,
        alpha_standard_error=alpha_error,
        alpha_ci=None
        if alpha is None or alpha_error is None
        else (max(0.0, alpha - Z_95 * alpha_error), min(1.0, alpha + Z_95 * alpha_error)),
        expected_alpha=summary.threshold_sum_fixed / THRESHOLD_SCALE / sampled if sampled else None,
        acceptance_rate=accepted / drafted if drafted else None,
        mean_accepted=accepted / runs if runs else None,
        tokens_per_pass=tokens_per_pass,
        tokens_per_pass_standard_error=tokens_error,
        tokens_per_pass_predicted=predicted,
        iid_check=_iid_check(tokens_per_pass, predicted, tokens_error),
        per_position=positions,
        accepted_histogram=_accepted_histogram(summary),
        conventions=engine_conventions(
            runs,
            drafted,
            accepted,
            summary.passing_tokens,
            [row.accepted for row in positions],
            [row.rate for row in positions],
        ),
    )


# --- uncertainty: variances over runs, not tokens ---------------------------------------
# Tokens of one run share a context, so they are not independent draws; the run is
# the independent unit. Both standard errors below treat runs as i.i.d. samples.


def _alpha_standard_error(
    runs: int, examined: int, alpha: float | None, sum_aa: float, sum_ee: float, sum_ae: float
) -> float | None:
    """Delta-method (ratio estimator) standard error of alpha = sum(a) / sum(e), over runs.

    Var(alpha) ~= n / (n - 1) * sum_j (a_j - alpha e_j)^2 / (sum_j e_j)^2.
    None with fewer than two runs or nothing examined.
    """
    if runs < 2 or alpha is None:
        return None
    residual = max(0.0, sum_aa - 2 * alpha * sum_ae + alpha * alpha * sum_ee)
    return float(np.sqrt(runs / (runs - 1) * residual) / examined)


def _mean_standard_error(runs: int, accepted: int, sum_aa: float) -> float | None:
    """Standard error of the mean of (a + 1) over runs (sample variance / n)."""
    if runs < 2:
        return None
    mean = accepted / runs
    variance = max(0.0, (sum_aa - runs * mean * mean) / (runs - 1))
    return float(np.sqrt(variance / runs))


def _tokens_per_pass_predicted(summary: Summary, alpha: float | None) -> float | None:
    """What the i.i.d. model predicts for these runs: mean over runs of (1 - alpha^(k+1)) / (1 - alpha).

    Each run keeps its own draft length k. Equal to the observed tokens per pass (within its
    standard error) when tokens pass independently with one probability.
    """
    runs = summary.runs
    if alpha is None or not runs:
        return None
    by_k = summary.runs_by_k
    total = sum(int(n) * formulas.expected_tokens_per_pass(alpha, k) for k, n in enumerate(by_k.tolist()) if n)
    return total / runs


def _iid_check(observed: float | None, predicted: float | None, error: float | None) -> IidCheck | None:
    """Does the i.i.d. model explain the logs? Compares observed and predicted tokens per pass.

    The prediction is fitted on the same runs, so this error is if anything too large and the
    test errs towards "consistent"; |z| > 3 is a clear misfit (e.g. acceptance that falls
    with the position in the draft, or a sampler bug).
    """
    if observed is None or predicted is None or error is None:
        return None
    difference = observed - predicted
    if error == 0.0:
        z = 0.0 if abs(difference) < 1e-9 else float("inf") if difference > 0 else float("-inf")
    else:
        z = difference / error
    return IidCheck(
        difference=difference,
        standard_error=error,
        z=z if np.isfinite(z) else None,
        consistent=bool(abs(z) <= CONSISTENT_Z),
    )


def _per_position(summary: Summary) -> tuple[PositionRate, ...]:
    """One row per 1-based draft position j = 1 .. max_k (see `PositionRate`)."""
    counts = summary.counts
    # at_least_k[j] = runs with k >= j; at_least_a[j] = runs with a >= j;
    # at_least_both[j] = runs with k >= j and a >= j - 1 (a = k when all kept, so a >= j - 1 and k >= j
    # is every run with a >= j - 1 except those that drafted exactly j - 1 and kept them all).
    at_least_k = np.cumsum(counts.sum(axis=1)[::-1])[::-1]
    at_least_a = np.cumsum(counts.sum(axis=0)[::-1])[::-1]
    all_kept = np.diagonal(counts)
    rows = []
    for position in range(1, summary.max_k + 1):
        drafts = int(at_least_k[position])
        reached = int(at_least_a[position - 1] - all_kept[position - 1])
        accepted = int(at_least_a[position])
        rows.append(
            PositionRate(
                position=position,
                drafts=drafts,
                reached=reached,
                accepted=accepted,
                rate=accepted / reached if reached else None,
                unconditional_rate=accepted / drafts if drafts else None,
            )
        )
    return tuple(rows)


def _accepted_histogram(summary: Summary) -> dict[str, int]:
    """Runs by accepted length, "0" .. str(max_k), zeros included (JSON keys are strings)."""
    by_accepted = summary.counts.sum(axis=0)
    return {str(a): int(by_accepted[a]) for a in range(summary.max_k + 1)}
