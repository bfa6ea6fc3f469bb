"""The progress bar of a long read, on stderr and only on a terminal (the command decides)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.progress import BarColumn, Progress, TaskProgressColumn, TextColumn, TimeElapsedColumn

from specaccept_cli.views.terminal import data_text

if TYPE_CHECKING:
    from rich.console import Console

    from specaccept_cli.read.sources import Source


class RichProgress:
    """Progress on stderr: bytes read of the total for files, runs counted for stdin."""

    def __init__(self, console: Console, sources: list[Source]) -> None:
        sizes = [source.size for source in sources]
        self.total_bytes = sum(s for s in sizes if s is not None) if all(s is not None for s in sizes) else None
        self.done_before = 0  # bytes of the sources already finished
        self.current_size = 0
        self.runs = 0
        self.progress = Progress(
            TextColumn("[progress.description]{task.description}"),
            BarColumn(),
            TaskProgressColumn(),
            TextColumn("{task.fields[runs]:,} runs"),
            TimeElapsedColumn(),
            console=console,
            transient=True,
        )
        self.task = self.progress.add_task("reading", total=self.total_bytes, runs=0)

    def __enter__(self) -> RichProgress:
        self.progress.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.progress.stop()

    def start_source(self, source: Source) -> None:
        self.done_before += self.current_size
        self.current_size = source.size or 0
        self.progress.update(self.task, description=f"reading {data_text(source.name)}")

    def advance(self, runs: int, position: int | None) -> None:
        self.runs += runs
        completed = None if position is None else self.done_before + position
        self.progress.update(self.task, completed=completed, runs=self.runs)
