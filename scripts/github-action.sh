#!/usr/bin/env bash
# The work of the specaccept GitHub Action (action.yml): audit logs, or merge shard summaries, with the gates,
# the baseline comparison, the step summary and annotations; then the step's outputs.
#
# Inputs arrive as INPUT_* environment variables, never spliced into the script's text: a value holding
# quotes or `$(...)` stays a value. It runs the same outside Actions (tests feed it a fake
# GITHUB_STEP_SUMMARY and GITHUB_OUTPUT), with `specaccept` on PATH or in SPECACCEPT_BIN.
# Exit status: specaccept's (0 ok, 1 a gate or comparison failed, 2 usage or input error).
set -euo pipefail

if [[ -n ${SPECACCEPT_BIN:-} ]]; then
    PATH="$SPECACCEPT_BIN:$PATH"
fi
outputs=${GITHUB_OUTPUT:-/dev/null}
step_summary=${GITHUB_STEP_SUMMARY:-/dev/null}
summary_path=${INPUT_SUMMARY_PATH:-specaccept-summary.json}

# A workflow command's message: `%`, CR and LF escaped as the runner expects, so a value cannot end it.
escaped() {
    local text=${1//'%'/'%25'}
    text=${text//$'\r'/'%0D'}
    printf '%s' "${text//$'\n'/'%0A'}"
}

fail_usage() {
    echo "::error title=specaccept action::$(escaped "$1")"
    echo "specaccept action: $1" >&2
    echo "exit-code=2" >>"$outputs"
    exit 2
}

# Whitespace- or newline-separated words; shell globs expand (a pattern that matches nothing stays as
# written, so specaccept names it in its error). Splitting and globbing are the point of the bare expansions.
paths=()
for word in ${INPUT_PATHS:-}; do paths+=("$word"); done
summaries=()
for word in ${INPUT_SUMMARIES:-}; do summaries+=("$word"); done
extra=()
for word in ${INPUT_ARGS:-}; do extra+=("$word"); done
if ((${#paths[@]} && ${#summaries[@]})); then
    fail_usage "give either paths (logs to audit) or summaries (shard summaries to merge), not both"
fi
if ((!${#paths[@]} && !${#summaries[@]})); then
    fail_usage "nothing to audit: give paths (logs) or summaries (shard summaries to merge)"
fi

fields=()
for pair in "p-field:${INPUT_P_FIELD:-}" "q-field:${INPUT_Q_FIELD:-}" "r-field:${INPUT_R_FIELD:-}" \
    "group-by:${INPUT_GROUP_BY:-}"; do
    if [[ -n ${pair#*:} ]]; then
        if ((${#summaries[@]})); then
            fail_usage "${pair%%:*} applies to logs (paths): summaries were read already"
        fi
        fields+=("--${pair%%:*}" "${pair#*:}")
    fi
done
gates=()
for pair in "min-alpha:${INPUT_MIN_ALPHA:-}" "min-tokens-per-pass:${INPUT_MIN_TOKENS_PER_PASS:-}" \
    "min-acceptance-rate:${INPUT_MIN_ACCEPTANCE_RATE:-}"; do
    if [[ -n ${pair#*:} ]]; then
        gates+=("--${pair%%:*}" "${pair#*:}")
    fi
done
tolerance=()
if [[ -n ${INPUT_MAX_DROP:-} ]]; then
    tolerance+=(--max-drop "$INPUT_MAX_DROP")
fi
if [[ -n ${INPUT_SIGNIFICANCE:-} ]]; then
    tolerance+=(--significance "$INPUT_SIGNIFICANCE")
fi

# The first run has no baseline yet: say so, compare with nothing, and let this run's summary become it.
baseline=${INPUT_BASELINE:-}
baseline_found=false
if [[ -n $baseline ]]; then
    if [[ -f $baseline ]]; then
        baseline_found=true
    else
        note="no baseline at $baseline yet (a first run, or it expired): nothing to compare with; this run's summary ($summary_path) can become it"
        echo "::warning title=specaccept baseline::$(escaped "$note")"
        printf '> **specaccept**: %s\n\n' "$note" >>"$step_summary"
    fi
fi

mkdir -p "$(dirname -- "$summary_path")"  # summary-path may name a folder of its own
status=0
if ((${#paths[@]})); then
    comparison=()
    if $baseline_found; then
        comparison=(--baseline "$baseline" "${tolerance[@]}")
    fi
    specaccept audit "${paths[@]}" --quiet --github --summary-out "$summary_path" \
        "${fields[@]}" "${gates[@]}" "${comparison[@]}" "${extra[@]}" || status=$?
else
    specaccept merge "${summaries[@]}" -o "$summary_path" --github "${gates[@]}" "${extra[@]}" || status=$?
    if $baseline_found && [[ -f $summary_path ]] && ((status != 2)); then
        diff_status=0
        specaccept diff "$baseline" "$summary_path" --github "${tolerance[@]}" || diff_status=$?
        if ((diff_status > status)); then
            status=$diff_status
        fi
    fi
fi

{
    echo "exit-code=$status"
    echo "baseline-found=$baseline_found"
    if [[ -f $summary_path ]]; then
        echo "summary-path=$summary_path"
        python - "$summary_path" <<'PY'
import gzip
import json
import sys

with open(sys.argv[1], "rb") as handle:
    raw = handle.read()
summary = json.loads(gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw)
for key in ("runs", "alpha", "tokens_per_pass"):
    value = summary.get(key)
    print(f"{key.replace('_', '-')}={'' if value is None else value}")
PY
    fi
} >>"$outputs"
exit "$status"
