"""Parquet at hostile sizes and with damaged pages: a checksum that does not match is an error naming the row group,
and one huge row group is read page by page, in bounded batches, at about the memory of small ones."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from specaccept_cli.read.parquet import BATCH_ROWS, read_parquet_file
from specaccept_cli.rule.batch import FieldSpec
from tests.helpers import invoke


def _runs_table(runs: int, k: int = 8, seed: int = 0) -> pa.Table:
    rng = np.random.default_rng(seed)
    offsets = pa.array(np.arange(0, (runs + 1) * k, k, dtype=np.int32))
    return pa.table({name: pa.ListArray.from_arrays(offsets, pa.array(rng.random(runs * k))) for name in "pqr"})


def _flip_low_bytes(path: Path, group: int, column: int) -> None:
    """Flip the top mantissa bit of doubles in the middle of one column chunk: still numbers in [0, 1), other ones.

    The chunk's values are plain little-endian doubles (no compression, no dictionary): bit 3 of byte 6 of each.
    """
    chunk = pq.ParquetFile(path).metadata.row_group(group).column(column)
    middle = chunk.data_page_offset + chunk.total_compressed_size // 2
    data = bytearray(path.read_bytes())
    start = middle - (middle - chunk.data_page_offset) % 8  # not aligned with the values: a guess kept in range
    for offset in range(start, start + 8 * 64, 8):
        data[offset + 6] ^= 0x08
    path.write_bytes(bytes(data))


def test_a_page_whose_checksum_does_not_match_is_an_error_naming_its_row_group(tmp_path: Path) -> None:
    path = tmp_path / "checked.parquet"
    pq.write_table(
        _runs_table(20_000),
        path,
        row_group_size=5_000,
        compression="none",
        use_dictionary=False,
        write_page_checksum=True,
    )
    whole = invoke("audit", str(path), "-o", "json")
    assert whole.exit_code == 0
    _flip_low_bytes(path, group=2, column=2)
    damaged = invoke("audit", str(path), "-o", "json")
    assert damaged.exit_code == 2
    assert damaged.stdout == ""
    assert damaged.stderr.startswith(f"specaccept: {path}: cannot read Parquet data in row group 2 after ")
    assert "CRC checksum verification failed" in damaged.stderr
    assert len(damaged.stderr.splitlines()) == 1
    skipped = invoke("audit", str(path), "-o", "json", "--on-error", "skip")
    assert skipped.exit_code == 1  # its only source skipped: the empty-audit gate fails
    assert skipped.stderr.endswith(
        "no valid run: skipped 1 unreadable source (--on-error skip; --allow-empty accepts that)\n"
    )


def test_a_file_without_checksums_still_reads(tmp_path: Path) -> None:
    path = tmp_path / "unchecked.parquet"
    pq.write_table(_runs_table(2_000), path, row_group_size=500)
    result = invoke("audit", str(path), "-o", "json")
    assert result.exit_code == 0


def test_one_huge_row_group_is_read_in_bounded_batches(tmp_path: Path) -> None:
    path = tmp_path / "one-group.parquet"
    pq.write_table(_runs_table(3 * BATCH_ROWS + 7), path, row_group_size=10**9)
    assert pq.ParquetFile(path).metadata.num_row_groups == 1
    lengths = [len(batch) for batch in read_parquet_file(path, "x", FieldSpec(), lambda error: None)]
    assert sum(lengths) == 3 * BATCH_ROWS + 7
    assert max(lengths) <= BATCH_ROWS


# The peak resident size of this process alone: VmHWM starts again at exec, while getrusage's ru_maxrss
# would carry over the peak of the process that forked it (here, pytest holding the table).
PEAK = """
import re, sys
from pathlib import Path
from specaccept_cli.read.parquet import read_parquet_file
from specaccept_cli.rule.batch import FieldSpec
runs = sum(len(batch) for batch in read_parquet_file(Path(sys.argv[1]), "x", FieldSpec(), lambda error: None))
print(runs, re.search(r"VmHWM:\\s+(\\d+) kB", Path("/proc/self/status").read_text()).group(1))
"""


def _peak_kib(path: Path) -> tuple[int, int]:
    done = subprocess.run([sys.executable, "-c", PEAK, str(path)], capture_output=True, check=True, timeout=120)
    runs, peak = done.stdout.split()
    return int(runs), int(peak)


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads the peak from /proc")
def test_memory_does_not_grow_with_the_row_group(tmp_path: Path) -> None:
    """80 MB in one row group cost about what the same runs in 20 groups do (read unbuffered: 53 MB more; now 6)."""
    table = _runs_table(400_000)
    one, many = tmp_path / "one.parquet", tmp_path / "many.parquet"
    pq.write_table(table, one, row_group_size=400_000, compression="none")
    pq.write_table(table, many, row_group_size=20_000, compression="none")
    del table
    (runs_one, peak_one), (runs_many, peak_many) = _peak_kib(one), _peak_kib(many)
    assert runs_one == runs_many == 400_000
    assert peak_one - peak_many < 30 << 10, (peak_one, peak_many)
