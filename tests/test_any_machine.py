"""`make test` passes on any CPU, at any path, at any terminal width: the goldens and the corpus run again
from a copy of the repository at a path of over 500 characters, in a narrow terminal, with numpy's optional
SIMD kernels switched off and OpenBLAS told to use the kernels of another core type.

Before the Wald test of equal rates summed in an order of its own (summary/fixed.py), 11 JSON goldens
differed in the last digits of `iid_check.equal_rates.statistic` under another OpenBLAS core type, and the
corpus tests missed a file name that the stderr table folded over two lines.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SUITES = ["tests/views/test_json_golden.py", "tests/read/test_corpus.py"]


def _disabled_simd() -> str:
    """Every optional (dispatched) SIMD target of numpy that this CPU has: the baseline cannot be disabled."""
    from numpy._core._multiarray_umath import __cpu_dispatch__, __cpu_features__

    return " ".join(feature for feature in __cpu_dispatch__ if __cpu_features__.get(feature))


def _copy(target: Path) -> None:
    ignore = shutil.ignore_patterns(".git", ".venv", "__pycache__", "*.egg-info", ".pytest_cache", ".hypothesis")
    for name in ("specaccept_cli", "tests", "examples"):
        shutil.copytree(ROOT / name, target / name, ignore=ignore, symlinks=True)
    shutil.copy2(ROOT / "pyproject.toml", target / "pyproject.toml")


@pytest.mark.slow
def test_goldens_and_corpus_pass_without_simd_at_a_long_path_in_a_narrow_terminal(tmp_path: Path) -> None:
    deep = tmp_path / ("a-long-directory-name-" * 11) / ("another-long-directory-name-" * 9) / "specaccept"
    assert len(str(deep)) > 500
    _copy(deep)
    env = {
        **os.environ,
        "PYTHONPATH": str(deep),  # the copy's package, in the subprocesses the goldens start too
        "NPY_DISABLE_CPU_FEATURES": _disabled_simd(),
        "OPENBLAS_CORETYPE": "Prescott",  # SSE3 kernels: another summation order than any machine's default
        "COLUMNS": "60",
        "HYPOTHESIS_PROFILE": "fast",
    }
    env.pop("SPECACCEPT_WRITE_GOLDEN", None)
    env.pop("SPECACCEPT_UPDATE_GOLDEN", None)
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:randomly", *SUITES],
        cwd=deep,
        env=env,
        capture_output=True,
        text=True,
        check=False,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert " passed" in done.stdout and "failed" not in done.stdout
    # the copy's own package ran, not the one this suite imported
    probe = subprocess.run(
        [sys.executable, "-c", "import specaccept_cli; print(specaccept_cli.__file__)"],
        cwd=deep / "examples",
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    assert probe.stdout.strip().startswith(str(deep))
