"""Capture (p, q, r) from a serving loop, in the form `specaccept audit` reads.

    from specaccept_cli.capture import Recorder
    recorder = Recorder("capture/")                     # Parquet parts: capture/part-00001.parquet, ...
    recorder.record(p, q, r, request_id=rid, step=s, accepted=n_accepted)   # once per verify step
    recorder.close()                                    # also at exit and on SIGTERM

Then `specaccept audit capture/ --reported-field accepted --cluster-field request_id`.
Integrations live beside it, each in its own extra: `specaccept_cli.capture.hf` (transformers).
"""

from __future__ import annotations

from specaccept_cli.capture.recorder import Recorder, RecorderStats

__all__ = ["Recorder", "RecorderStats"]
