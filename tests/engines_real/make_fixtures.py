"""Write tests/fixtures/llamacpp-0c1e570/ from real runs of the server `make engines` built.

    .venv/bin/python -m tests.engines_real.make_fixtures

Three runs of the draft model (default verbosity; -lv 4; LLAMA_TRACE=1 with -lv 4), the requests of
`llamacpp_server.run_server`. The logs keep every line that carries acceptance figures (and the lines of
request handling around them); the token-by-token trace output of -lv 4 is left out to keep the files small.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import orjson

from tests.engines_real.llamacpp_models import write_models
from tests.engines_real.llamacpp_server import GGUF_PY, SERVER, run_server

OUT = Path(__file__).resolve().parents[1] / "fixtures" / "llamacpp-0c1e570"
DRAFT = ["--spec-type", "draft-simple", "--spec-draft-n-max", "4"]
KEPT = (
    "draft acceptance",
    "acc per pos",
    "statistics",
    "draft tokens",
    "print_timing",
    "release",
    "all slots are idle",
    "eval time",
    "total time",
    "LLAMA_TRACE",
)


def kept(lines: list[str]) -> list[str]:
    return [line for line in lines if any(marker in line for marker in KEPT)]


def main() -> int:
    if not SERVER.is_file():
        print(f"llama-server is not built at {SERVER}: run `make engines` first", file=sys.stderr)
        return 2
    OUT.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        models = write_models(work, GGUF_PY)
        md = ["-md", str(models[1])]
        runs = {
            "default": run_server(models, work / "default", [*md, *DRAFT]),
            "lv4": run_server(models, work / "lv4", [*md, *DRAFT, "-lv", "4"]),
            "trace": run_server(models, work / "trace", [*md, *DRAFT, "-lv", "4"], {"LLAMA_TRACE": "1"}),
        }
        for name, capture in runs.items():
            (OUT / f"{name}.log").write_text("\n".join(kept(capture.lines())) + "\n")
        trace = runs["trace"]
        (OUT / "before.prom").write_bytes(trace.before.read_bytes())
        (OUT / "after.prom").write_bytes(trace.after.read_bytes())
        (OUT / "responses.jsonl").write_bytes(trace.responses.read_bytes())
        (OUT / "completion.json").write_bytes(orjson.dumps(trace.bodies[0], option=orjson.OPT_INDENT_2) + b"\n")
    for path in sorted(OUT.iterdir()):
        print(f"{path.name}: {path.stat().st_size:,} bytes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
