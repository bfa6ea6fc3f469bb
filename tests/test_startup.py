"""`check` is for quick shell checks: it must not pay for numpy or pyarrow (see `make bench` for its time)."""

from __future__ import annotations

import subprocess
import sys


def test_check_imports_neither_numpy_nor_pyarrow_nor_rich() -> None:
    code = (
        "import sys\n"
        "from specaccept_cli.cli import main\n"
        "sys.argv = ['specaccept', 'check', '--p', '0.9,0.2,0.8', '--q', '0.5,0.8,0.4', '--r', '0.1,0.5,0.2']\n"
        "try:\n"
        "    main()\n"
        "except SystemExit:\n"
        "    pass\n"
        "heavy = sorted(name for name in ('numpy', 'pyarrow', 'rich', 'orjson') if name in sys.modules)\n"
        "print(heavy, file=sys.stderr)\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, check=False)
    assert result.stdout == b"1\n"
    assert result.stderr.strip().splitlines()[-1] == b"[]"
