"""The docs: a short README, a manual in docs/ that names every command and option, a CLI reference generated
from Click that is never stale, links that lead somewhere, and the library and module-map text true to the code."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import click
import pytest

from tests.helpers import all_commands, load_script

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
README = (ROOT / "README.md").read_text(encoding="utf-8")
CLI_PAGE = DOCS / "cli.md"
# The pages written by hand (the CLI reference is generated, so it would document every option trivially).
MANUAL = {path.name: path.read_text(encoding="utf-8") for path in sorted(DOCS.glob("*.md")) if path != CLI_PAGE}
PAGES = {"README.md": README, **{f"docs/{name}": text for name, text in MANUAL.items()}}


def test_quick_start_is_exactly_make_demo_and_make_test() -> None:
    section = README.split("## Quick start", 1)[1].split("\n## ", 1)[0]
    block = re.search(r"```console\n(.*?)```", section, re.S)
    assert block is not None
    assert block.group(1).split("\n")[:-1] == ["make demo", "make test"]


def test_the_readme_is_short_and_shows_the_three_uses() -> None:
    assert len(README.splitlines()) <= 250
    uses = README.split("## Three uses", 1)[1].split("\n## ", 1)[0]
    assert len(re.findall(r"^### \d\. ", uses, re.M)) == 3
    assert "$ specaccept check --p 0.9,0.2,0.8 --q 0.5,0.8,0.4 --r 0.1,0.5,0.2\n1\n" in uses
    assert "| specaccept audit -" in uses and "--baseline" in uses


@pytest.mark.parametrize("name", sorted(all_commands()))
def test_every_command_has_a_section_in_the_manual(name: str) -> None:
    assert any(f"## `specaccept {name}" in text for text in MANUAL.values()), f"no docs page has a `{name}` section"


@pytest.mark.parametrize(
    ("command", "option"),
    [
        (name, option)
        for name, command in sorted(all_commands().items())
        for param in command.params
        if isinstance(param, click.Option)
        for option in param.opts
        if option.startswith("--")
    ],
)
def test_every_option_is_explained_in_the_manual(command: str, option: str) -> None:
    pattern = rf"(?<![\w-]){re.escape(option)}(?![\w-])"
    assert any(re.search(pattern, text) for text in PAGES.values()), f"{command} {option} is on no docs page"


def test_the_cli_reference_is_current() -> None:
    """docs/cli.md is what scripts/cli_reference.py writes today: run `make docs` after changing an option."""
    assert CLI_PAGE.read_text(encoding="utf-8") == load_script("cli_reference").reference(), (
        "docs/cli.md is stale: make docs"
    )


def test_the_cli_reference_is_what_help_prints() -> None:
    """The generated page holds every command's real `--help`, as a terminal of 100 columns shows it."""
    page = CLI_PAGE.read_text(encoding="utf-8")
    for name in ("audit", "expect"):
        result = subprocess.run(
            [sys.executable, "-m", "specaccept_cli", name, "--help"],
            capture_output=True,
            text=True,
            env={"COLUMNS": "100", "PATH": "/usr/bin:/bin"},
            check=True,
        )
        section = page.split(f"## `specaccept {name}`\n", 1)[1]
        assert section.split("```text\n", 1)[1].split("\n```", 1)[0] == result.stdout.rstrip()


def test_the_cli_reference_check_fails_on_a_stale_page(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    module = load_script("cli_reference")
    stale = tmp_path / "cli.md"
    stale.write_text(module.reference().replace("--min-alpha", "--minimum-alpha"), encoding="utf-8")
    monkeypatch.setattr(module, "PAGE", stale)
    monkeypatch.setattr(module, "ROOT", tmp_path)
    assert module.main(["--check"]) == 1
    assert module.main([]) == 0
    assert module.main(["--check"]) == 0
    assert "--minimum-alpha" not in stale.read_text(encoding="utf-8")


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces as hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def _anchors(text: str) -> set[str]:
    outside_code = re.sub(r"^```.*?^```", "", text, flags=re.M | re.S)
    return {_slug(match) for match in re.findall(r"^#+ (.*)$", outside_code, re.M)}


def _links(text: str) -> list[str]:
    outside_code = re.sub(r"^\s*```.*?^\s*```", "", text, flags=re.M | re.S)
    outside_code = re.sub(r"`[^`\n]*`", "", outside_code)
    return re.findall(r"\]\(([^)\s]+)\)", outside_code)


@pytest.mark.parametrize("page", sorted(PAGES))
def test_every_link_leads_to_a_file_and_heading_that_exist(page: str) -> None:
    base = (ROOT / page).parent
    for link in _links(PAGES[page]):
        if link.startswith(("http://", "https://")):
            continue
        target, _, anchor = link.partition("#")
        path = (base / target).resolve() if target else ROOT / page
        assert path.exists(), f"{page}: link to {link}: no such file"
        if anchor:
            assert anchor in _anchors(path.read_text(encoding="utf-8")), f"{page}: link to {link}: no such heading"


def test_the_index_lists_every_page() -> None:
    index = MANUAL["index.md"]
    for name in [*MANUAL, CLI_PAGE.name]:
        if name != "index.md":
            assert f"]({name})" in index, f"docs/index.md does not link {name}"


def test_the_library_examples_run_from_the_root_on_shipped_files() -> None:
    """The library page's Python examples, and the package docstring's, run as written from the repository's
    root on the example files it ships, without click or rich."""
    import specaccept_cli

    blocks = re.findall(r"```python\n(.*?)```", MANUAL["library.md"], re.S)
    assert blocks
    docstring = specaccept_cli.__doc__ or ""
    package_example = "\n".join(
        line[4:] for line in docstring.splitlines() if line.startswith("    ") and "#" not in line[:6]
    )
    check = (
        "\nimport sys\nassert 'click' not in sys.modules and 'rich' not in sys.modules\n"
        "print(by_model.groups, logs.runs, both.runs, findings.numbers.alpha)\n"
    )
    code = "\n".join(blocks) + "\n" + package_example + check
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, check=False)
    assert result.returncode == 0, result.stderr.decode()
    assert result.stdout.split()[-3:-1] == [b"2000", b"4000"], result.stdout
    assert b"test-model" in result.stdout


def test_help_works_on_the_package_and_every_public_name() -> None:
    """`help()` renders the package and each name of `__all__` (a field type left to TYPE_CHECKING broke it)."""
    import pydoc

    import specaccept_cli

    assert "summarise" in pydoc.render_doc(specaccept_cli)
    for name in specaccept_cli.__all__:
        value = getattr(specaccept_cli, name)
        if isinstance(value, str):  # __version__: help("0.1.0") would look up a help topic of that name
            continue
        assert pydoc.render_doc(value), name


def test_summaries_with_and_without_clusters_refuse_to_add_saying_what_to_do() -> None:
    from specaccept_cli import FieldSpec, Plan, estimate, summarise

    logs = summarise([str(ROOT / "examples/serving-logs.jsonl.gz")])
    by_request = summarise(
        [str(ROOT / "examples/server-reported.jsonl.gz")],
        FieldSpec(extras=("request_id",)),
        Plan(cluster_field="request_id"),
    )
    with pytest.raises(ValueError, match=r"Plan\(cluster_field=\.\.\.\)\), or add the other's \.without_clusters\(\)"):
        logs + by_request
    with pytest.raises(ValueError, match="without_clusters"):
        by_request + logs
    both = logs + by_request.without_clusters()
    assert both.clusters is None and both.runs == logs.runs + by_request.runs
    assert both.counts.sum() == logs.counts.sum() + by_request.counts.sum()
    assert estimate(both).alpha_ci is not None  # over runs, as for any log read without clusters


def test_the_module_table_matches_the_tree() -> None:
    """Every module named in the module map exists, and every module of the package is named."""
    text = MANUAL["architecture.md"]
    table = text[text.index("| module | holds |") :].split("\n\n", 1)[0]
    named: set[str] = set()
    for cell in (line.split("|")[1] for line in table.splitlines()[2:]):
        named.update(re.findall(r"`([\w/]+\.py)`", cell))
    package = ROOT / "specaccept_cli"
    actual = {str(path.relative_to(package)) for path in package.rglob("*.py")}
    assert named - actual == set(), "docs/architecture.md names modules that do not exist"
    unnamed = {path for path in actual - named if not path.endswith(("/__init__.py", "__main__.py"))}
    assert unnamed == set(), "modules missing from the module map in docs/architecture.md"


@pytest.mark.parametrize(
    ("page", "start", "end"),
    [
        ("statistics.md", "<!-- study:start -->", "<!-- study:end -->"),  # tests/study/run.py --write-docs
        ("performance.md", "<!-- bench:start (make bench writes this part) -->", "<!-- bench:end -->"),
        ("scale-out.md", "<!-- bench-dask:start (make bench-dask writes this part) -->", "<!-- bench-dask:end -->"),
    ],
)
def test_the_pages_that_measurements_write_into_have_their_markers(page: str, start: str, end: str) -> None:
    text = MANUAL[page]
    assert text.count(start) == 1 and text.count(end) == 1 and text.index(start) < text.index(end)
    assert all(start not in other for name, other in PAGES.items() if name != f"docs/{page}")


def test_the_writers_point_at_those_pages() -> None:
    import importlib

    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        bench = importlib.import_module("bench")
        bench_dask = importlib.import_module("bench_dask")
    except ImportError as exc:  # duckdb or dask missing: the benchmarks do not run here
        pytest.skip(str(exc))
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))
    from tests.study import run

    assert (run.PAGE, run.START) == (DOCS / "statistics.md", "<!-- study:start -->")
    assert (bench.PAGE, bench.PAGE_START) == (
        DOCS / "performance.md",
        "<!-- bench:start (make bench writes this part) -->",
    )
    assert bench_dask.PAGE == DOCS / "scale-out.md" and bench_dask.PAGE_START in MANUAL["scale-out.md"]
