"""The byte strings that mark each engine's per-request payload, apart from the readers (`read.payloads`).

A line holds a payload of a format only if it holds one of that format's markers (a key of the payload,
quoted). Sniffing every JSONL input for payloads looks for these first, so that a file of (p, q, r) rows,
which never holds them, is told apart without importing the payload readers (about 25 ms of start-up).
"""

from __future__ import annotations

MARKERS: dict[str, tuple[bytes, ...]] = {
    "aiperf-records": (b'"spec_decode_acceptance"',),
    "vllm-payload": (b'"speculative_decoding"', b'"speculative_decoding_stats"'),
    "trtllm-payload": (b'"total_accepted_draft_tokens"',),
    "sglang-payload": (b'"spec_verify_ct"', b'"spec_tokens_details"', b'"verify_lengths"'),
    "llamacpp-payload": (b'"draft_n"',),
}


def has_marker(text: bytes) -> bool:
    """Whether `text` holds any payload format's marker."""
    return any(marker in text for markers in MARKERS.values() for marker in markers)
