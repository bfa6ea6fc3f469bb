"""specaccept: audit speculative-decoding acceptance logs with the exact accept-prefix rule.

The core is a library: `accept_prefix` (scalar), `vectorized.accept_prefix_batch`,
`sources.read_all` (files/stdin -> batches), `pipeline.summarise` (batches -> `Summary`).
Nothing here imports click or rich, and numpy/pyarrow load only when first needed.
"""

from __future__ import annotations

from specaccept_cli.rule.scalar import accept_prefix

__version__ = "0.1.0"

__all__ = ["__version__", "accept_prefix"]
