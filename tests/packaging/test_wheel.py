"""The Linux wheel, built and tested here (cibuildwheel builds the others: `.github/workflows/wheels.yml`).

From a copy of the sources (no build directory to reuse), `pip wheel` builds a wheel with a compiler and
one with `CC=/bin/false`, as on a machine without one. The first carries both compiled parts, the second
none, and installs all the same; each, installed apart from the checkout, names what it uses in
`--version` and gives the same audit, byte for byte.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import orjson
import pytest

ROOT = Path(__file__).resolve().parents[2]
SOURCES = ("pyproject.toml", "setup.py", "README.md", "LICENSE", "specaccept_cli")
EXAMPLE = ROOT / "examples" / "serving-logs.jsonl.gz"


def _source_copy(where: Path) -> Path:
    tree = where / "src"
    tree.mkdir()
    for name in SOURCES:
        source = ROOT / name
        if source.is_dir():
            shutil.copytree(source, tree / name, ignore=shutil.ignore_patterns("__pycache__", "*.so", "*.pyd"))
        else:
            shutil.copy2(source, tree / name)
    return tree


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, Path]]:
    """(wheel, install directory) for a build with a compiler and one without."""
    found = {}
    for name, env in (("compiled", {}), ("no compiler", {"CC": "/bin/false", "LDSHARED": "/bin/false"})):
        where = tmp_path_factory.mktemp(name.replace(" ", "-"))
        tree = _source_copy(where)
        build = [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(where), "."]
        done = subprocess.run(build, cwd=tree, env={**os.environ, **env}, capture_output=True, text=True, check=False)
        assert done.returncode == 0, done.stderr[-3000:]
        (wheel,) = where.glob("specaccept-*.whl")
        target = where / "site"
        install = [sys.executable, "-m", "pip", "install", "--no-deps", "-q", "--target", str(target), str(wheel)]
        assert subprocess.run(install, capture_output=True, text=True, check=False).returncode == 0
        found[name] = (wheel, target)
    return found


def _isolated(target: Path) -> tuple[list[str], dict[str, str]]:
    """An interpreter that sees the installed wheel and the dependencies, not the checkout: without `site`
    (-S), no editable install's import hook; the dependencies' directory is named after the wheel's."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(target), sysconfig.get_paths()["purelib"]])}
    env.pop("SPECACCEPT_NO_EXTENSIONS", None)
    return [sys.executable, "-S"], env


def _run(target: Path, *args: str) -> subprocess.CompletedProcess[bytes]:
    python, env = _isolated(target)
    return subprocess.run([*python, "-m", "specaccept_cli", *args], cwd=target, env=env, capture_output=True)


def test_the_wheel_built_with_a_compiler_carries_both_compiled_parts(installed: dict[str, tuple[Path, Path]]) -> None:
    wheel, target = installed["compiled"]
    assert wheel.name.endswith("-linux_x86_64.whl") or "linux" in wheel.name
    names = zipfile.ZipFile(wheel).namelist()
    assert any(name.startswith("specaccept_cli/_jsonl_c.") and name.endswith(".so") for name in names)
    assert any(name.startswith("specaccept_cli/_rule_c.") and name.endswith(".so") for name in names)
    version = _run(target, "--version")
    assert version.returncode == 0
    assert b"JSONL reader: compiled (C)\nbatch rule: compiled (C)" in version.stdout
    python, env = _isolated(target)
    where = subprocess.run(  # the installed package answered, and its compiled parts, not the checkout's
        [
            *python,
            "-c",
            "import specaccept_cli._jsonl_c as c, specaccept_cli._rule_c as r; print(c.__file__, r.__file__)",
        ],
        env=env,
        cwd=target.parent,
        capture_output=True,
        text=True,
        check=True,
    )
    assert all(path.startswith(str(target)) for path in where.stdout.split())


def test_without_a_compiler_the_package_installs_and_says_so(installed: dict[str, tuple[Path, Path]]) -> None:
    wheel, target = installed["no compiler"]
    assert not [name for name in zipfile.ZipFile(wheel).namelist() if name.endswith((".so", ".pyd"))]
    version = _run(target, "--version")
    assert version.returncode == 0
    assert b"JSONL reader: pure Python (the compiled reader is not built: no C compiler at install time?)" in (
        version.stdout
    )
    assert b"batch rule: numpy (the compiled kernel is not built: no C compiler at install time?)" in version.stdout


def test_both_wheels_give_the_same_audit(installed: dict[str, tuple[Path, Path]]) -> None:
    audits = []
    for name in ("compiled", "no compiler"):
        done = _run(installed[name][1], "audit", str(EXAMPLE), "-o", "json")
        assert done.returncode in (0, 1), done.stderr
        summary = orjson.loads(done.stdout)
        summary.pop("provenance")
        audits.append(summary)
    assert audits[0] == audits[1] and audits[0]["runs"] > 0
