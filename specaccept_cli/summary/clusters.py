"""Per-cluster sums: what cluster-robust (sandwich) variances need, additive by cluster key.

In a serving log runs come in requests, and a request (its prompt) is easy or hard for the
draft model as a whole: runs of one request are not independent draws. With `--cluster-field`
the state keeps, per cluster, the sums every estimate is a ratio of (runs, and per draft
position j the runs that drafted, reached and kept token j; accepted and examined tokens are
their sums over j). Squares of per-cluster sums are not additive, the sums are: so the tally
keeps the sums by key, adds them key by key across batches, shards and `merge`, and the
variances are taken once, at the end (`summary.estimates`).

Layout, chosen for 1M clusters: a cluster key is the 64-bit BLAKE2b hash of its text (the
statistics need only which runs share a cluster, not the name; two of a million keys collide
with probability about 3e-8), and the sums are numpy columns, sorted by key. Per-position
counts are int32 while they fit. Adding keeps a short tuple of sorted blocks and merges the
last two whenever the older is at most twice the newer (a binary counter), so adding many
small batches to a large tally costs O(log n) per cluster, not a copy of the whole tally.
"""

from __future__ import annotations

import base64
import functools
import zlib
from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
from msgspec import Struct
from msgspec.structs import force_setattr

from specaccept_cli.rule.batch import IntArray

KeyArray = npt.NDArray[np.uint64]
CountArray = npt.NDArray[np.signedinteger[Any]]
_SIGNED = (np.int8, np.int16, np.int32)


# Request-like fields, in the order they are preferred: a run log's own names, then the ids engine payloads
# carry (SGLang's `rid` and `meta_info.id`, AIPerf's `metadata.x_request_id`, an OpenAI-style `x_request_id`).
REQUEST_FIELDS = (
    "request_id",
    "request.id",
    "req_id",
    "rid",
    "requestId",
    "x_request_id",
    "meta_info.id",
    "metadata.x_request_id",
    "metadata.request_id",
)
NO_CLUSTERS = "none"  # `--cluster-field none`: intervals over runs, whatever the rows hold


def field_value(row: object, path: str) -> object:
    """The value at a dotted path of a JSON row (None where it is missing): `request.id` is row["request"]["id"]."""
    value = row
    for part in path.split("."):
        if not isinstance(value, dict) or part not in value:
            return None
        value = value[part]
    return value


def request_field(row: object, names: Sequence[str] = REQUEST_FIELDS) -> str | None:
    """The first of `names` that the row holds with a value (not null, not an empty string)."""
    for name in names:
        value = field_value(row, name)
        if value is not None and value != "":
            return name
    return None


def request_field_of_columns(names: Sequence[str], wanted: Sequence[str] = REQUEST_FIELDS) -> str | None:
    """The first of `wanted` among a table's (dotted) column paths, as a Parquet schema gives them."""
    present = set(names)
    return next((name for name in wanted if name in present), None)


def _narrow(counts: npt.NDArray[np.signedinteger[Any]]) -> CountArray:
    """The narrowest signed type every count fits (a request's counts are mostly below 128: a byte each).

    Sums are always taken with an explicit int64 (or float64) accumulator, never in the narrow type.
    """
    top = int(counts.max()) if counts.size else 0
    kind = next((kind for kind in _SIGNED if top <= np.iinfo(kind).max), np.int64)
    return counts if counts.dtype == kind else counts.astype(kind)


class ClusterBlock(Struct, frozen=True, eq=False):
    """Sums of clusters with distinct, sorted keys. Position j (1-based) is column j - 1."""

    keys: KeyArray
    runs: CountArray
    drafts: CountArray  # [cluster, j-1] = runs that drafted token j (k >= j)
    reached: CountArray  # runs that tested token j (a >= j - 1 and k >= j)
    kept: CountArray  # runs that kept token j (a >= j)

    @property
    def positions(self) -> int:
        return int(self.drafts.shape[1])

    @property
    def accepted(self) -> npt.NDArray[np.int64]:
        """Each cluster's accepted tokens: a run keeps tokens 1..a."""
        accepted: npt.NDArray[np.int64] = self.kept.sum(axis=1, dtype=np.int64)
        return accepted

    @property
    def examined(self) -> npt.NDArray[np.int64]:
        """Each cluster's examined tokens: a run tests tokens 1..min(a + 1, k)."""
        examined: npt.NDArray[np.int64] = self.reached.sum(axis=1, dtype=np.int64)
        return examined

    def __len__(self) -> int:
        return int(self.keys.shape[0])

    @classmethod
    def empty(cls) -> ClusterBlock:
        none = np.zeros((0, 0), dtype=np.int32)
        return cls(np.zeros(0, dtype=np.uint64), np.zeros(0, dtype=np.int64), none, none, none)

    @classmethod
    def of_runs(cls, keys: KeyArray, k: IntArray, accepted: IntArray) -> ClusterBlock:
        """The sums of runs (k, accepted) whose cluster keys are `keys`."""
        unique, code = np.unique(keys, return_inverse=True)
        clusters = unique.shape[0]
        width = int(k.max()) + 1 if k.shape[0] else 1

        def at_least(values: IntArray, where: npt.NDArray[np.bool_] | None = None) -> npt.NDArray[np.int64]:
            """[cluster, v] = runs of the cluster with value >= v (or, with `where`, value == v among those)."""
            chosen = code if where is None else code[where]
            hist = np.bincount(
                chosen * width + (values if where is None else values[where]), minlength=clusters * width
            )
            table = hist.reshape(clusters, width).astype(np.int64)
            if where is not None:
                return table
            return np.cumsum(table[:, ::-1], axis=1)[:, ::-1]

        k_at_least = at_least(k)
        a_at_least = at_least(accepted)
        all_kept = at_least(accepted, k == accepted)
        positions = width - 1
        reached = a_at_least[:, :positions] - all_kept[:, :positions]
        return cls(
            keys=unique.astype(np.uint64),
            runs=_narrow(k_at_least[:, 0].copy()),
            drafts=_narrow(k_at_least[:, 1:]),
            reached=_narrow(reached),
            kept=_narrow(a_at_least[:, 1:]),
        )

    def padded(self, positions: int) -> ClusterBlock:
        if positions == self.positions:
            return self

        def wider(counts: CountArray) -> CountArray:
            out = np.zeros((counts.shape[0], positions), dtype=counts.dtype)
            out[:, : counts.shape[1]] = counts
            return out

        return ClusterBlock(self.keys, self.runs, wider(self.drafts), wider(self.reached), wider(self.kept))

    @classmethod
    def combined(cls, blocks: Sequence[ClusterBlock]) -> ClusterBlock:
        """One block of the sums of all `blocks`, key by key."""
        blocks = [block for block in blocks if len(block)]
        if not blocks:
            return cls.empty()
        if len(blocks) == 1:
            return blocks[0]
        positions = max(block.positions for block in blocks)
        blocks = [block.padded(positions) for block in blocks]
        unique, inverse = np.unique(np.concatenate([block.keys for block in blocks]), return_inverse=True)
        count = unique.shape[0]

        def reduce(name: str) -> npt.NDArray[np.int64]:
            """Sum one column by key: a weighted count per position (exact: float64 holds counts below 2^53)."""
            column = np.concatenate([getattr(block, name) for block in blocks])
            if column.ndim == 1:
                return np.bincount(inverse, weights=column, minlength=count).astype(np.int64)
            summed = np.empty((count, column.shape[1]), dtype=np.int64)
            for position in range(column.shape[1]):
                summed[:, position] = np.bincount(inverse, weights=column[:, position], minlength=count)
            return summed

        return cls(
            keys=unique,
            runs=_narrow(reduce("runs")),
            drafts=_narrow(reduce("drafts")),
            reached=_narrow(reduce("reached")),
            kept=_narrow(reduce("kept")),
        )

    @property
    def nbytes(self) -> int:
        return sum(array.nbytes for array in (self.keys, self.runs, self.drafts, self.reached, self.kept))


# eq stays on: the Struct's != then calls the __eq__ below (with eq=False it would compare identities)
class ClusterTally(Struct, frozen=True, dict=True):
    """Per-cluster sums of the runs of one summary, keyed by the value of `field`."""

    field: str
    blocks: tuple[ClusterBlock, ...] = ()

    @classmethod
    def of_runs(cls, field: str, keys: KeyArray, k: IntArray, accepted: IntArray) -> ClusterTally:
        return cls(field, (ClusterBlock.of_runs(keys, k, accepted),))

    def __add__(self, other: ClusterTally) -> ClusterTally:
        if other.field != self.field:
            raise ValueError(f"cannot add summaries clustered by different fields ({self.field!r}, {other.field!r})")
        blocks = list(self.blocks + other.blocks)
        while len(blocks) >= 2 and len(blocks[-2]) <= 2 * len(blocks[-1]):
            newer = blocks.pop()
            blocks[-1] = ClusterBlock.combined([blocks[-1], newer])
        return ClusterTally(self.field, tuple(blocks))

    @functools.cached_property
    def sums(self) -> ClusterBlock:
        """Every cluster once: the blocks combined (computed once, when estimates need it).

        The combined block then stands for the blocks (the same sums, one block), so a million
        clusters are held once, not twice.
        """
        combined = ClusterBlock.combined(self.blocks)
        force_setattr(self, "blocks", (combined,) if len(combined) else ())
        return combined

    @property
    def clusters(self) -> int:
        return len(self.sums)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ClusterTally):
            return NotImplemented
        if self.field != other.field:
            return False
        positions = max(self.sums.positions, other.sums.positions)
        mine, theirs = self.sums.padded(positions), other.sums.padded(positions)
        return all(
            np.array_equal(getattr(mine, name), getattr(theirs, name))
            for name in ("keys", "runs", "drafts", "reached", "kept")
        )

    __hash__ = None  # type: ignore[assignment]

    def to_dict(self) -> dict[str, Any]:
        """Columnar and compact: each column as little-endian numpy bytes, deflated, in base64 (`encode_column`).

        A million clusters with a draft length of 4 take about 15 MB (as JSON lists they took 400 MB):
        keys are 8 random bytes each, counts the narrowest unsigned type they fit, and deflate squeezes
        the many small counts further. `from_dict` reads this and the lists of earlier files.
        """
        sums = self.sums
        return {
            "field": self.field,
            "encoding": COLUMN_ENCODING,
            "clusters": len(sums),
            "positions": sums.positions,
            **{name: encode_column(getattr(sums, name)) for name in ("keys", "runs", "drafts", "reached", "kept")},
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ClusterTally:
        """Rebuild a tally from `to_dict` (or the lists of earlier files); ValueError when it is not one a log
        could have produced."""
        field = data["field"]
        if not isinstance(field, str) or not field:
            raise ValueError("clusters: 'field' must be a field path")
        keys, runs, (drafts, reached, kept) = _decoded(data) if "encoding" in data else _listed(data)
        if np.unique(keys).shape[0] != keys.shape[0]:
            raise ValueError("clusters: a key appears twice")
        if (
            (runs < 0).any()
            or (kept < 0).any()
            or (reached < kept).any()
            or (drafts < reached).any()
            or (drafts.shape[1] and (drafts[:, 0] > runs).any())
            or (np.diff(drafts, axis=1) > 0).any()
            or (np.diff(kept, axis=1) > 0).any()
        ):
            raise ValueError("clusters: inconsistent per-cluster sums (kept <= reached <= drafts <= runs)")
        order = np.argsort(keys, kind="stable")
        if bool((order == np.arange(order.shape[0])).all()):  # written sorted: no copies
            block = ClusterBlock(keys, _narrow(runs), _narrow(drafts), _narrow(reached), _narrow(kept))
        else:
            block = ClusterBlock(
                keys[order],
                _narrow(runs[order]),
                _narrow(drafts[order]),
                _narrow(reached[order]),
                _narrow(kept[order]),
            )
        return cls(field, (block,))


COLUMN_ENCODING = "numpy-le-deflate-base64"
_UNSIGNED = (np.uint8, np.uint16, np.uint32, np.uint64)
MAX_COUNT = 2**53  # sums stay exact in float64 (the key-by-key adding) below this


def encode_column(values: npt.NDArray[Any]) -> dict[str, Any]:
    """A column (1-D, or 2-D: one row per cluster) as {dtype, shape, data}: data is base64 of deflated bytes.

    Counts are stored in the narrowest unsigned type that holds their largest value; keys as uint64.
    """
    column = np.ascontiguousarray(values)
    if column.dtype != np.uint64:
        top = int(column.max()) if column.size else 0
        column = column.astype(next(kind for kind in _UNSIGNED if top <= np.iinfo(kind).max))
    raw = column.astype(column.dtype.newbyteorder("<"), copy=False).tobytes()
    return {
        "dtype": column.dtype.str.lstrip("<>|="),
        "shape": list(column.shape),
        "data": base64.b64encode(zlib.compress(raw, 6)).decode("ascii"),
    }


def decode_column(data: object, name: str, rows: int, width: int | None) -> npt.NDArray[Any]:
    """The column `encode_column` wrote, checked to be `rows` long (and `width` wide for a matrix)."""
    if not isinstance(data, dict) or not isinstance(data.get("data"), str) or not isinstance(data.get("shape"), list):
        raise ValueError(f"clusters: {name} is not an encoded column")
    kinds = {np.dtype(kind).str.lstrip("<>|="): kind for kind in _UNSIGNED}
    kind = kinds.get(data.get("dtype"))  # type: ignore[arg-type]
    shape = data["shape"]
    expected = [rows] if width is None else [rows, width]
    if kind is None or shape != expected:
        raise ValueError(f"clusters: {name} has an unknown type or the wrong shape (expected {expected})")
    size = int(np.prod(expected)) * np.dtype(kind).itemsize
    try:
        raw = zlib.decompressobj().decompress(base64.b64decode(data["data"], validate=True), size + 1)
    except (ValueError, zlib.error) as exc:
        raise ValueError(f"clusters: {name} is not base64 of deflated bytes ({exc})") from None
    if len(raw) != size:
        raise ValueError(f"clusters: {name} holds {len(raw)} bytes, not {size}")
    return np.frombuffer(raw, dtype=np.dtype(kind).newbyteorder("<")).reshape(expected)


def _decoded(data: dict[str, Any]) -> tuple[KeyArray, npt.NDArray[np.int64], list[npt.NDArray[np.int64]]]:
    if data["encoding"] != COLUMN_ENCODING:
        raise ValueError(f"clusters: unknown encoding {data['encoding']!r}")
    rows, width = data["clusters"], data["positions"]
    if type(rows) is not int or type(width) is not int or rows < 0 or not 0 <= width <= 1024:
        raise ValueError("clusters: 'clusters' and 'positions' must be whole numbers")
    keys = decode_column(data["keys"], "keys", rows, None)
    if keys.dtype != np.uint64:
        raise ValueError("clusters: keys must be 64-bit unsigned integers")
    columns = []
    for name, wide in (("runs", None), ("drafts", width), ("reached", width), ("kept", width)):
        column = decode_column(data[name], name, rows, wide)
        if column.dtype == np.uint64 and column.size and int(column.max()) > MAX_COUNT:
            raise ValueError(f"clusters: {name} out of range")
        columns.append(column.astype(np.int64))
    return keys.astype(np.uint64), columns[0], columns[1:]


def _listed(data: dict[str, Any]) -> tuple[KeyArray, npt.NDArray[np.int64], list[npt.NDArray[np.int64]]]:
    """The columns of a file written as JSON lists (before the compact encoding)."""
    raw_keys = data["keys"]
    if not isinstance(raw_keys, list) or any(type(key) is not int or not 0 <= key < 2**64 for key in raw_keys):
        raise ValueError("clusters: keys must be 64-bit unsigned integers")
    keys = np.array(raw_keys, dtype=np.uint64)
    runs = _integers(data["runs"], "runs")
    count = keys.shape[0]
    matrices = [_matrix(data[name], name, count) for name in ("drafts", "reached", "kept")]
    if len({matrix.shape[1] for matrix in matrices}) > 1 or runs.shape[0] != count:
        raise ValueError("clusters: the columns have different lengths")
    return keys, runs, matrices


def _integers(values: object, name: str) -> npt.NDArray[np.int64]:
    """A list of whole numbers in int64's range (keys are checked as unsigned separately)."""
    if not isinstance(values, list) or any(type(item) is not int for item in values):
        raise ValueError(f"clusters: {name} must be a list of whole numbers")
    if values and (max(values) > 2**53 or min(values) < 0):  # sums are exact in float64 below 2^53
        raise ValueError(f"clusters: {name} out of range")
    return np.array(values, dtype=np.int64)


def _matrix(rows: object, name: str, count: int) -> npt.NDArray[np.int64]:
    if not isinstance(rows, list) or len(rows) != count or any(not isinstance(row, list) for row in rows):
        raise ValueError(f"clusters: {name} must be one list per cluster")
    width = len(rows[0]) if rows else 0
    if any(len(row) != width for row in rows):
        raise ValueError(f"clusters: {name} rows have different lengths")
    flat = [item for row in rows for item in row]
    if any(type(item) is not int for item in flat) or (flat and (max(flat) > 2**53 or min(flat) < 0)):
        raise ValueError(f"clusters: {name} must hold whole, non-negative counts")
    return np.array(flat, dtype=np.int64).reshape(count, width)


class Units(Struct, frozen=True):
    """The independent units the variances sum over, as float columns: clusters, or runs when none were given.

    Runs are given as the distinct (k, a) cells of the joint histogram, each `weight` times (identical runs
    contribute identical terms), so run-level variances cost O(k^2), not O(runs).
    """

    weight: npt.NDArray[np.float64]
    runs: npt.NDArray[np.float64]
    accepted: npt.NDArray[np.float64]
    examined: npt.NDArray[np.float64]
    # [unit, j - 1]: clusters' counts as they are held (int32 or int64, no float copy of a million rows).
    drafts: npt.NDArray[Any]
    reached: npt.NDArray[Any]
    kept: npt.NDArray[Any]

    @property
    def count(self) -> int:
        return round(float(self.weight.sum()))

    @classmethod
    def of_runs(cls, counts: npt.NDArray[np.int64], positions: int) -> Units:
        k, a = np.nonzero(counts)
        position = np.arange(1, positions + 1)
        drafts = k[:, None] >= position
        kept = a[:, None] >= position
        reached = (a[:, None] >= position - 1) & drafts
        return cls(
            weight=counts[k, a].astype(np.float64),
            runs=np.ones(k.shape[0]),
            accepted=a.astype(np.float64),
            examined=np.minimum(a + 1, k).astype(np.float64),
            drafts=drafts.astype(np.float64),
            reached=reached.astype(np.float64),
            kept=kept.astype(np.float64),
        )

    @classmethod
    def of_clusters(cls, sums: ClusterBlock, positions: int) -> Units:
        sums = sums.padded(max(positions, sums.positions))
        drafts, reached, kept = (getattr(sums, name)[:, :positions] for name in ("drafts", "reached", "kept"))
        return cls(
            weight=np.ones(len(sums)),
            runs=sums.runs.astype(np.float64),
            accepted=sums.accepted.astype(np.float64),
            examined=sums.examined.astype(np.float64),
            drafts=drafts,
            reached=reached,
            kept=kept,
        )
