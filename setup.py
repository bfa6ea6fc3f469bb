"""The optional compiled parts (specaccept_cli._jsonl_c, ._rule_c); everything else is in pyproject.toml.

The extensions are optional: without a C compiler, or with SPECACCEPT_NO_EXTENSIONS=1 at build time, the
package installs without them and takes its numpy and pure-Python paths (`specaccept --version` says which).
"""

import os

from setuptools import Extension, setup

extensions = []
if not os.environ.get("SPECACCEPT_NO_EXTENSIONS"):
    flags = ["-O2", "-std=c99", "-ffp-contract=off"] if os.name != "nt" else ["/fp:precise"]
    extensions += [
        Extension(
            f"specaccept_cli.{name}",
            [f"specaccept_cli/{name}.c"],
            optional=True,  # a failed build leaves the pure path, never a failed install
            extra_compile_args=flags,  # no fused multiply-adds: every product rounded as numpy rounds it
        )
        for name in ("_jsonl_c", "_rule_c")  # the JSONL block reader; the rule and its tallies over a batch
    ]

setup(ext_modules=extensions)
