"""Regenerate the corpus of bad inputs: `python tests/corpus/make_corpus.py`.

One small file per class of problem. Every JSONL file holds good rows at lines 1, 2
and 4 and the bad one at line 3, so each test can name the line; Parquet files hold
the bad value at row 2 of 3. The expectations live in tests/read/test_corpus.py.
Output is deterministic (gzip without a timestamp), so the committed files only
change when this script does.
"""

from __future__ import annotations

import gzip
import json
import shutil
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

HERE = Path(__file__).parent
GOOD = b'{"id": "ok", "p": [0.9, 0.2, 0.8], "q": [0.5, 0.8, 0.4], "r": [0.1, 0.5, 0.2]}'

# name -> the bad line 3 of a JSONL file
BAD_LINES: dict[str, bytes] = {
    "invalid_json.jsonl": b'{"p": [0.9, 0.2], "q": [0.5, 0.8], "r": [0.1,',
    "not_an_object.jsonl": b"[0.9, 0.5, 0.1]",
    "missing_field.jsonl": b'{"id": "x", "target_p": [0.5], "q": [0.5], "r": [0.1]}',
    "not_a_list.jsonl": b'{"p": 0.5, "q": [0.5], "r": [0.1]}',
    "non_numeric.jsonl": b'{"p": [0.5, "0.7"], "q": [0.5, 0.5], "r": [0.1, 0.1]}',
    "nan.jsonl": b'{"p": [0.5, NaN], "q": [0.5, 0.5], "r": [0.1, 0.1]}',
    "infinity.jsonl": b'{"p": [0.5], "q": [1e999], "r": [0.1]}',
    "different_lengths.jsonl": b'{"p": [0.5, 0.5], "q": [0.5], "r": [0.1, 0.1]}',
    "out_of_range.jsonl": b'{"p": [0.5, 0.5, 0.5], "q": [0.5, 0.5, 0.5], "r": [0.1, 0.2, 1.5]}',
    "q_zero.jsonl": b'{"p": [0.5, 0.5], "q": [0.5, 0], "r": [0.1, 0.1]}',
    "invalid_utf8.jsonl": b'{"id": "caf\xe9", "p": [0.5], "q": [0.5], "r": [0.1]}',
    "overlong_line.jsonl": b'{"p": [' + b"0.5, " * 100 + b'0.5], "q": [0.5], "r": [0.1]}',
    "hostile.jsonl": b'{"::error::x\\u001b[31m": 1, "[bold]k[/bold]": 2, "q": [0.5], "r": [0.1]}',
}


def jsonl(bad: bytes) -> bytes:
    return GOOD + b"\n" + GOOD + b"\n" + bad + b"\n" + GOOD + b"\n"


def main() -> None:
    for name, bad in BAD_LINES.items():
        (HERE / name).write_bytes(jsonl(bad))

    # 200 good rows, gzip-compressed and cut off part-way: the rows before the cut are read.
    rows = b"".join(GOOD.replace(b'"ok"', b'"%d"' % i) + b"\n" for i in range(200))
    packed = gzip.compress(rows, mtime=0)
    (HERE / "truncated.jsonl.gz").write_bytes(packed[: len(packed) * 2 // 3])

    (HERE / "not_parquet.parquet").write_bytes(b'{"p": [0.5], "q": [0.5], "r": [0.1]}\n')
    columns = {"p": [[0.5], [0.5]], "q": [[0.5], [0.5]], "u": [[0.1], [0.2]]}
    pq.write_table(pa.table(columns), HERE / "missing_column.parquet")
    table = {
        "p": [[0.9, 0.2], [0.5, float("nan")], [0.3]],
        "q": [[0.5, 0.8], [0.5, 0.5], [0.4]],
        "r": [[0.1, 0.5], [0.1, 0.1], [0.2]],
    }
    pq.write_table(pa.table(table), HERE / "nan_value.parquet")
    empty = pa.table({name: pa.array([], pa.list_(pa.float64())) for name in ("p", "q", "r")})
    pq.write_table(empty, HERE / "empty.parquet")

    (HERE / "empty.jsonl").write_bytes(b"")
    (HERE / "blank_lines.jsonl").write_bytes(b"\n  \n\t\r\n\n")
    shutil.rmtree(HERE / "no_parquet_dir", ignore_errors=True)
    (HERE / "no_parquet_dir").mkdir()
    (HERE / "no_parquet_dir" / "notes.txt").write_text(json.dumps({"why": "a directory without .parquet files"}))


if __name__ == "__main__":
    main()
