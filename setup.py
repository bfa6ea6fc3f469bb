"""The optional compiled JSONL reader (specaccept_cli._jsonl_c); everything else is in pyproject.toml.

The extension is optional: without a C compiler, or with SPECACCEPT_NO_EXTENSIONS=1 at build time, the
package installs without it and reads JSONL on the pure-Python path (`specaccept --version` says which).
"""

import os

from setuptools import Extension, setup

extensions = []
if not os.environ.get("SPECACCEPT_NO_EXTENSIONS"):
    extensions.append(
        Extension(
            "specaccept_cli._jsonl_c",
            ["specaccept_cli/_jsonl_c.c"],
            optional=True,  # a failed build leaves the pure-Python path, never a failed install
            extra_compile_args=["-O2", "-std=c99"] if os.name != "nt" else [],
        )
    )

setup(ext_modules=extensions)
