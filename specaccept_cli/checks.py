"""Checks on estimates: minimum thresholds (gates), comparison with a baseline, and the server audits.

Both are pure functions of Summary objects and return plain results; the command
line decides how to print them and turns a failure into exit status 1.

The baseline comparison is a one-sided two-sample z test over runs. For a metric m
with estimates b (baseline) and c (current) and standard errors se_b, se_c (over
runs, so tokens of one run are not counted as independent draws), and a tolerated
relative drop d (`--max-drop`), it tests

    H0: true c >= (1 - d) * true b      (the metric dropped by at most d)

with z = (c - (1 - d) b) / sqrt(se_c^2 + (1 - d)^2 se_b^2) and p = P(Z <= z).
The metric regresses when p < significance. Rejecting H0 needs the estimated drop
to exceed d *and* that excess to be unlikely under noise alone; when the true drop
is exactly d, false alarms happen at the rate `significance`, and less often for
smaller drops. With d = 0 it is the plain test z = (c - b) / sqrt(se_b^2 + se_c^2).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from specaccept_cli.summary.probability import normal_cdf

if TYPE_CHECKING:  # at run time checks need only attributes: `check` builds its options without numpy
    from specaccept_cli.summary.estimates import Estimates
    from specaccept_cli.summary.server import ReportedTally, SamplerTally
    from specaccept_cli.summary.windows import WindowTally

# Gate option names (as in the command line) -> (Estimates attribute, label).
GATE_METRICS: dict[str, tuple[str, str]] = {
    "min_alpha": ("alpha", "alpha"),
    "min_tokens_per_pass": ("tokens_per_pass", "tokens per pass"),
    "min_acceptance_rate": ("acceptance_rate", "acceptance rate"),
}

# Metrics compared with a baseline: (Estimates attribute, label, standard-error attribute).
COMPARED_METRICS: tuple[tuple[str, str, str], ...] = (
    ("alpha", "alpha", "alpha_standard_error"),
    ("tokens_per_pass", "tokens per pass", "tokens_per_pass_standard_error"),
)

DEFAULT_MAX_DROP = 0.02
DEFAULT_SIGNIFICANCE = 0.01


def option_name(key: str) -> str:
    return "--" + key.replace("_", "-")


@dataclass(frozen=True)
class GateResult:
    """One threshold checked against a summary. A metric with no value (no runs) fails."""

    option: str  # e.g. "--min-alpha"
    metric: str  # e.g. "alpha"
    label: str  # e.g. "alpha"
    threshold: float
    value: float | None

    @property
    def passed(self) -> bool:
        return self.value is not None and self.value >= self.threshold

    def message(self) -> str:
        threshold = shown_threshold(self.threshold)
        if self.value is None:
            return f"{self.label} has no value (no runs to estimate it from); {self.option} {threshold} fails"
        relation = "is at least" if self.passed else "is below"
        short = f"{self.value:.6g}"
        if (float(short) >= self.threshold) != self.passed:  # rounded onto or across the threshold
            short = shown_against(self.value, self.threshold)
        return f"{self.label} = {short} {relation} {self.option} {threshold}"

    def to_dict(self) -> dict[str, Any]:
        return _pick(self, "option", "metric", "threshold", "value", "passed")


def shown_threshold(threshold: float) -> str:
    """A threshold as the user wrote it (its shortest exact form)."""
    short = format(threshold, "g")
    return short if float(short) == threshold else repr(threshold)


def shown_against(value: float, threshold: float, decimals: int = 4) -> str:
    """`value` with enough decimals that it never reads equal to a `threshold` it differs from.

    At least `decimals`, and at least as many as the threshold has, so rounding cannot carry the
    value across the threshold: against `--min-alpha 0.5017`, 0.501696 shows as 0.501696, not 0.5017.
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


def check_gates(summary: Estimates, thresholds: Mapping[str, float | None]) -> list[GateResult]:
    """Results for every threshold given (keys of GATE_METRICS; None means not set), in a fixed order."""
    unknown = set(thresholds) - set(GATE_METRICS)
    if unknown:
        raise KeyError(f"unknown gates: {sorted(unknown)}")
    results = []
    for key, (metric, label) in GATE_METRICS.items():
        threshold = thresholds.get(key)
        if threshold is None:
            continue
        value = getattr(summary, metric)
        results.append(GateResult(option_name(key), metric, label, threshold, value))
    return results


# --- baseline comparison ----------------------------------------------------------------


@dataclass(frozen=True)
class MetricComparison:
    """One metric, baseline against current. `verdict` is "ok", "regressed" or "untestable"."""

    metric: str
    label: str
    baseline: float | None
    current: float | None
    baseline_standard_error: float | None
    current_standard_error: float | None
    change: float | None  # (current - baseline) / baseline
    z: float | None
    p: float | None
    verdict: str
    baseline_runs: int = 0
    current_runs: int = 0

    @property
    def failed(self) -> bool:
        return self.verdict != "ok"

    def message(self, max_drop: float, significance: float) -> str:
        if self.verdict == "untestable":
            return (
                f"{self.label} cannot be compared with the baseline: each side needs a value and at least 2 runs "
                f"(baseline {_fmt(self.baseline)} from {self.baseline_runs} runs, "
                f"current {_fmt(self.current)} from {self.current_runs} runs)"
            )
        change = "" if self.change is None else f" ({self.change:+.2%})"
        z = "" if self.z is None else f"z = {self.z:.2f}, "
        test = f"{z}p = {self.p:.3g}"
        if self.verdict == "regressed":
            return (
                f"{self.label} regressed: {_fmt(self.baseline)} -> {_fmt(self.current)}{change}, a drop of more than "
                f"--max-drop {max_drop:g} at --significance {significance:g} ({test})"
            )
        return f"{self.label}: {_fmt(self.baseline)} -> {_fmt(self.current)}{change}, no regression ({test})"

    def to_dict(self) -> dict[str, Any]:
        return _pick(
            self,
            "metric",
            "baseline",
            "current",
            "baseline_standard_error",
            "current_standard_error",
            "change",
            "z",
            "p",
            "verdict",
        )


def _pick(result: object, *names: str) -> dict[str, Any]:
    """The machine form of a result: the named attributes, in that order."""
    return {name: getattr(result, name) for name in names}


def _fmt(value: float | None) -> str:
    return "null" if value is None else f"{value:.6g}"


@dataclass(frozen=True)
class Comparison:
    max_drop: float
    significance: float
    metrics: list[MetricComparison]

    @property
    def failures(self) -> list[MetricComparison]:
        return [metric for metric in self.metrics if metric.failed]

    def to_dict(self) -> dict[str, Any]:
        return {
            "max_drop": self.max_drop,
            "significance": self.significance,
            "test": "one-sided z over runs: H0 current >= (1 - max_drop) * baseline; regressed when p < significance",
            "metrics": [metric.to_dict() for metric in self.metrics],
            "regressed": bool(self.failures),
        }


def drop_test(
    baseline: float, baseline_se: float, current: float, current_se: float, max_drop: float
) -> tuple[float | None, float]:
    """(z, p) of the one-sided test of H0: current >= (1 - max_drop) * baseline.

    With no variance on either side the answer is certain: p = 0 when the current
    value is below the tolerated floor, else 1 (z is then undefined: None).
    """
    keep = 1.0 - max_drop
    difference = current - keep * baseline
    spread = math.sqrt(current_se * current_se + keep * keep * baseline_se * baseline_se)
    if spread == 0.0:
        return None, 0.0 if difference < 0 else 1.0
    z = difference / spread
    return z, normal_cdf(z)


def compare(
    baseline: Estimates,
    current: Estimates,
    max_drop: float = DEFAULT_MAX_DROP,
    significance: float = DEFAULT_SIGNIFICANCE,
) -> Comparison:
    """Compare alpha and tokens per pass; see the module docstring for the exact rule."""
    if not 0.0 <= max_drop < 1.0:
        raise ValueError(f"max_drop must be in [0, 1), not {max_drop}")
    if not 0.0 < significance < 1.0:
        raise ValueError(f"significance must be in (0, 1), not {significance}")
    rows = []
    for metric, label, se_name in COMPARED_METRICS:
        b, c = getattr(baseline, metric), getattr(current, metric)
        se_b, se_c = getattr(baseline, se_name), getattr(current, se_name)
        change = (c - b) / b if b is not None and c is not None and b != 0 else None
        if b is None or c is None or se_b is None or se_c is None:
            runs = (baseline.runs, current.runs)
            rows.append(MetricComparison(metric, label, b, c, se_b, se_c, change, None, None, "untestable", *runs))
            continue
        z, p = drop_test(b, se_b, c, se_c, max_drop)
        verdict = "regressed" if p < significance else "ok"
        rows.append(
            MetricComparison(metric, label, b, c, se_b, se_c, change, z, p, verdict, baseline.runs, current.runs)
        )
    return Comparison(max_drop, significance, rows)


# --- server audits ------------------------------------------------------------------------


def audit_failures(
    reported: ReportedTally | None, sampler: SamplerTally | None, max_mismatches: int | None
) -> list[str]:
    """One line per failed audit check: too many mismatches, or a sampler test that rejects."""
    failures = []
    if reported is not None and max_mismatches is not None and reported.mismatches > max_mismatches:
        top = reported.diagnosis()[0]
        hint = f"; most explained by {top['rule']} ({top['explains']})" if top["explains"] else ""
        failures.append(f"mismatches: {reported.mismatches} > --max-mismatches {max_mismatches}{hint}")
    if sampler is not None:
        for name, result in (("calibration", sampler.calibration()), ("r uniformity", sampler.r_uniformity())):
            if result.ok is False:
                failures.append(
                    f"sampler {name}: p = {result.p_value:.3g} < --sampler-significance {sampler.significance:g} "
                    f"(statistic {result.statistic:.4g})"
                )
    return failures


def drift_failure(windows: WindowTally | None, significance: float) -> list[str]:
    """`--check-drift`: one line when alpha is not constant over the log, or when that cannot be tested."""
    from specaccept_cli.summary.windows import MIN_DRIFT_WINDOWS, describe_position, drift_test

    drift = None if windows is None else drift_test(windows)
    if windows is None or drift is None:
        return [f"drift cannot be tested: it needs at least {MIN_DRIFT_WINDOWS} windows holding runs"]
    if drift.p_value >= significance:
        return []
    return [
        f"drift: alpha is not constant over the log (p = {drift.p_value:.3g} < --significance {significance:g}); "
        f"likeliest change at {describe_position(windows, drift.change_at)}: "
        f"{_fmt(drift.alpha_before)} before, {_fmt(drift.alpha_after)} after"
    ]
