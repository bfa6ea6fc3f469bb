"""Capture (p, q, r) from Hugging Face transformers' assisted generation (`pip install specaccept[hf]`).

    from specaccept_cli.capture import Recorder
    from specaccept_cli.capture.hf import capture_assisted_generation

    with Recorder("capture/") as recorder, capture_assisted_generation(recorder):
        model.generate(**inputs, assistant_model=draft, do_sample=True)

With `do_sample=True` and a draft model, transformers runs the accept rule in the module-level
`transformers.generation.utils._speculative_sampling`, which `_assisted_decoding` looks up by name
at every step. While the context is open that name is wrapped: p and q are taken with the
library's own expressions on the library's own tensors, r is the one `torch.rand_like` draw the
library makes inside the call (observed, not made: the generated tokens do not change), and the
library's `n_matches` is written as `accepted`. The count the loop commits after its EOS and
max-length cut arrives later, at `update_candidate_strategy`, and is written as `committed`.
A library that draws r another way (no draw, two draws, another shape) stops the generation with
a `CaptureError` instead of writing rows that would not audit.

With `do_sample=False` the library never calls `_speculative_sampling`: `_assisted_decoding` keeps drafted
tokens while they equal the argmax of the target's processed logits (`selected_tokens =
new_logits.argmax(dim=-1)`, then the first mismatch stops). Those steps are written as `argmax` rows: the
drafted tokens as the candidate generator returned them (`get_candidates`, wrapped), and the target's argmax at
each drafted position taken from the logits the loop hands `update_candidate_strategy` (its processed
`new_logits`), so the audit recomputes the library's own count. Greedy steps with `assistant_ensemble_weight`
compare against the argmax of a mixture the loop does not pass on, and are not written.

Only the transformers releases whose source was read and tested are accepted (`SUPPORTED`);
others are refused by name, since the function's signature and the place of the EOS cut have
moved between releases (4.37-4.39 `max_matches`, 4.40-5.15 `is_done_candidate` with the EOS
adjustment inside the function, 5.16-5.17 `assistant_ensemble_weight` beside it, 5.18 on the cut
in the loop).
"""

from __future__ import annotations

import importlib
import itertools
import re
import threading
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from msgspec import Struct, field

from specaccept_cli.capture.recorder import Recorder

# (major, minor) releases whose `_speculative_sampling` and `_assisted_decoding` were read and tested.
SUPPORTED = ((5, 18), (5, 24))
TESTED = "5.24.0"
# What a row holds besides the user's labels.
ROW_FIELDS = frozenset(
    {"p", "q", "r", "time", "request_id", "step", "accepted", "committed", "position", "draft_tokens", "rule"}
    | {"target_tokens"}
    | {"generator", "ensemble_weight", "target_p"}
)
_PARAMETERS = ("candidate_input_ids", "candidate_logits", "candidate_length", "new_logits", "assistant_ensemble_weight")


class CaptureError(RuntimeError):
    """transformers does not behave the way the capture was built for: no row would be right."""


def check_version(version: str) -> None:
    """Refuse a transformers release outside `SUPPORTED`, by name."""
    match = re.match(r"(\d+)\.(\d+)", version)
    low, high = SUPPORTED
    if match is None or not low <= (int(match.group(1)), int(match.group(2))) <= high:
        raise CaptureError(
            f"transformers {version} is not supported by specaccept_cli.capture.hf "
            f"(supported: {low[0]}.{low[1]} to {high[0]}.{high[1]}.x, tested on {TESTED}): "
            "its speculative sampling has another signature or cuts EOS elsewhere, so rows could be wrong"
        )


class _Request(Struct):
    """One `generate` call's state: its id, the step counter and the row waiting for its committed count."""

    request_id: str
    generator: str = ""
    step: int = 0
    pending: dict[str, Any] | None = None
    greedy: bool = False  # do_sample off, no ensemble weight: the loop keeps drafts equal to the target's argmax
    drafted: list[int] | None = None  # this step's drafted tokens (greedy), from `get_candidates`
    position: int = 0  # tokens before this step's draft (greedy)


class _Capture(Struct):
    """One recording thread's state: where rows go, the request ids, its labels and its open generations."""

    recorder: Recorder
    request_ids: Callable[[], str]
    labels: dict[str, Any]
    requests: list[_Request] = field(default_factory=list)  # this thread's open generations, innermost last

    def flush(self, request: _Request, committed: int | None) -> None:
        row, request.pending = request.pending, None
        if row is None:
            return
        p, q, r = row.pop("p"), row.pop("q"), row.pop("r")
        self.recorder.record(p, q, r, committed=committed, rule="standard", **row, **self.labels)

    def record_greedy(self, request: _Request, scores: Any, committed: int) -> None:
        """A greedy step as an `argmax` row: the drafted tokens, and the argmax of the processed logits the loop
        compared them with at each drafted position; `accepted` is the loop's own count of leading matches."""
        drafted, request.drafted = request.drafted, None
        if not drafted:
            return
        target = scores[0, : len(drafted)].argmax(dim=-1).tolist()
        accepted = next((index for index, (a, b) in enumerate(zip(drafted, target)) if a != b), len(drafted))
        self.recorder.record_step(
            "argmax",
            {"draft_tokens": drafted, "target_tokens": target},
            request_id=request.request_id,
            step=request.step,
            accepted=accepted,
            committed=committed,
            position=request.position,
            generator=request.generator,
            **self.labels,
        )


class _Thread(threading.local):
    def __init__(self) -> None:
        self.captures: list[_Capture] = []
        self.draws: list[Any] | None = None


_LOCAL = _Thread()
_INSTALL_LOCK = threading.Lock()
_installed = 0
_originals: dict[str, Any] = {}


def _current() -> tuple[_Capture, _Request] | None:
    if not _LOCAL.captures:
        return None
    capture = _LOCAL.captures[-1]
    return (capture, capture.requests[-1]) if capture.requests else None


def _install() -> None:
    """Wrap the three names (once, for every thread); each wrapper is a pass-through outside a capture."""
    global _installed
    torch: Any = importlib.import_module("torch")
    transformers: Any = importlib.import_module("transformers")
    utils: Any = importlib.import_module("transformers.generation.utils")
    with _INSTALL_LOCK:
        if _installed == 0:
            check_version(transformers.__version__)
            original_sampling = utils._speculative_sampling
            names = tuple(_signature(original_sampling))
            if names != _PARAMETERS:
                raise CaptureError(
                    f"transformers {transformers.__version__}: _speculative_sampling takes ({', '.join(names)}), "
                    f"not ({', '.join(_PARAMETERS)})"
                )
            mixin = utils.GenerationMixin
            _originals.update(
                sampling=original_sampling,
                rand_like=torch.rand_like,
                decoding=mixin._assisted_decoding,
                generator=mixin._get_candidate_generator,
            )
            torch.rand_like = _observed_rand_like(torch.rand_like)
            utils._speculative_sampling = _recorded_sampling(original_sampling, torch)
            mixin._assisted_decoding = _bracketed_decoding(mixin._assisted_decoding)
            mixin._get_candidate_generator = _watched_generator(mixin._get_candidate_generator)
        _installed += 1


def _uninstall() -> None:
    global _installed
    with _INSTALL_LOCK:
        _installed -= 1
        if _installed == 0:
            torch: Any = importlib.import_module("torch")
            utils: Any = importlib.import_module("transformers.generation.utils")
            torch.rand_like = _originals["rand_like"]
            utils._speculative_sampling = _originals["sampling"]
            utils.GenerationMixin._assisted_decoding = _originals["decoding"]
            utils.GenerationMixin._get_candidate_generator = _originals["generator"]
            _originals.clear()


def _signature(function: Callable[..., Any]) -> list[str]:
    import inspect

    return list(inspect.signature(function).parameters)


def _observed_rand_like(rand_like: Callable[..., Any]) -> Callable[..., Any]:
    def observed(*args: Any, **kwargs: Any) -> Any:
        draw = rand_like(*args, **kwargs)
        if _LOCAL.draws is not None:
            _LOCAL.draws.append(draw)
        return draw

    return observed


def _recorded_sampling(original: Callable[..., Any], torch: Any) -> Callable[..., Any]:
    def sampling(
        candidate_input_ids: Any,
        candidate_logits: Any,
        candidate_length: int,
        new_logits: Any,
        assistant_ensemble_weight: float | None = None,
    ) -> Any:
        current = _current()
        if current is None or candidate_length < 1:
            return original(
                candidate_input_ids, candidate_logits, candidate_length, new_logits, assistant_ensemble_weight
            )
        capture, request = current
        if request.pending is not None:  # the loop never reported the last step's committed count
            capture.flush(request, None)
        with torch.no_grad():  # the library's own expressions, on its own tensors
            drafted = candidate_input_ids[:, -candidate_length:]
            positions = torch.arange(candidate_length)
            q_i = candidate_logits.softmax(dim=-1)[:, positions, drafted].squeeze(0, 1).reshape(-1)
            p_i = new_logits.softmax(dim=-1)[:, positions, drafted].squeeze(0, 1).reshape(-1)
        draws: list[Any] = []
        _LOCAL.draws = draws
        try:
            valid_tokens, n_matches = original(
                candidate_input_ids, candidate_logits, candidate_length, new_logits, assistant_ensemble_weight
            )
        finally:
            _LOCAL.draws = None
        if len(draws) != 1 or draws[0].numel() != candidate_length:
            shapes = ", ".join(str(tuple(draw.shape)) for draw in draws) or "none"
            raise CaptureError(
                f"_speculative_sampling drew r with torch.rand_like {len(draws)} time(s) (shapes: {shapes}) "
                f"for {candidate_length} drafted tokens, not once with one value per token: "
                "this transformers samples another way, and the capture would write wrong rows"
            )
        r_i = draws[0].reshape(-1)
        labels: dict[str, Any] = {}
        if assistant_ensemble_weight is not None:
            # The library accepts on r <= 1 - w + w·p/q = v/q with v = w·p + (1 - w)·q: v is the "p" the rule sees.
            weight = float(assistant_ensemble_weight)
            labels = {"ensemble_weight": weight, "target_p": p_i.tolist()}
            p_i = weight * p_i + (1.0 - weight) * q_i
        request.pending = {
            "p": p_i,
            "q": q_i,
            "r": r_i,
            "request_id": request.request_id,
            "step": request.step,
            "accepted": int(n_matches),
            "position": int(candidate_input_ids.shape[1] - candidate_length),
            "draft_tokens": drafted[0].tolist(),
            "generator": request.generator,
            **labels,
        }
        return valid_tokens, n_matches

    return sampling


def _bracketed_decoding(original: Callable[..., Any]) -> Callable[..., Any]:
    def decoding(self: Any, *args: Any, **kwargs: Any) -> Any:
        capture = _LOCAL.captures[-1] if _LOCAL.captures else None
        if capture is None:
            return original(self, *args, **kwargs)
        config = _bound(original, self, args, kwargs).get("generation_config")
        greedy = config is not None and not config.do_sample
        greedy = greedy and getattr(config, "assistant_ensemble_weight", None) is None
        request = _Request(capture.request_ids(), greedy=greedy)
        capture.requests.append(request)
        try:
            return original(self, *args, **kwargs)
        finally:
            capture.flush(request, None)
            capture.requests.remove(request)

    return decoding


def _bound(function: Callable[..., Any], self: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
    """The arguments of a call by name (`generation_config` may come by position or keyword); {} if they do not bind."""
    import inspect

    try:
        return dict(inspect.signature(function).bind(self, *args, **kwargs).arguments)
    except TypeError:
        return {}


def _watched_generator(original: Callable[..., Any]) -> Callable[..., Any]:
    """The candidate generator, its `update_candidate_strategy` wrapped (it receives the committed count) and,
    for greedy steps, its `get_candidates` (the drafted tokens, the last `candidate_length` of the ids)."""

    def get_candidate_generator(self: Any, *args: Any, **kwargs: Any) -> Any:
        generator = original(self, *args, **kwargs)
        current = _current()
        if current is None:
            return generator
        capture, request = current
        request.generator = type(generator).__name__
        update = generator.update_candidate_strategy
        candidates = generator.get_candidates

        def get_candidates(input_ids: Any, *args: Any, **kwargs: Any) -> Any:
            found = candidates(input_ids, *args, **kwargs)
            if request.greedy:
                request.position = int(input_ids.shape[1])
                request.drafted = [int(token) for token in found[0][0, request.position :].tolist()]
            return found

        def update_candidate_strategy(input_ids: Any, scores: Any, num_matches: Any) -> Any:
            if request.greedy:
                capture.record_greedy(request, scores, int(num_matches))
            else:
                capture.flush(request, int(num_matches))
            request.step += 1
            return update(input_ids, scores, num_matches)

        generator.get_candidates = get_candidates
        generator.update_candidate_strategy = update_candidate_strategy
        return generator

    return get_candidate_generator


@contextmanager
def capture_assisted_generation(
    recorder: Recorder, *, request_id: str | None = None, **labels: Any
) -> Iterator[Recorder]:
    """Record a row per verify step of every assisted `generate` call made in this thread, sampled or greedy.

    Each `generate` call is one request: `request_id` names it (a second call in the same context
    is `<request_id>-2`, ...); by default a random prefix and a counter. `labels` go on every row.
    Rows have `rule` (`standard`: the library accepts on r <= p/q), `p`, `q`, `r`, `request_id`, `step`
    (the loop's iteration), `accepted` (the library's
    count), `committed` (after the EOS / max-length cut), `position` (tokens before the draft),
    `draft_tokens` and `generator` (the candidate generator's class: `UniversalSpeculativeDecodingGenerator`
    and `AssistedCandidateGeneratorDifferentTokenizers` map logits between vocabularies). Greedy calls
    (`do_sample=False`) write `argmax` rows instead of p, q and r: `draft_tokens` and `target_tokens` (the
    target's argmax at each drafted position), with the same request, step, counts, position and generator.
    """
    taken = sorted(ROW_FIELDS.intersection(labels))
    if taken:
        raise ValueError(f"label {taken[0]!r} is a field the capture writes itself")
    counter = itertools.count(1)
    prefix = uuid.uuid4().hex[:12]

    def next_id() -> str:
        n = next(counter)
        if request_id is None:
            return f"{prefix}-{n}"
        return request_id if n == 1 else f"{request_id}-{n}"

    _install()
    capture = _Capture(recorder, next_id, labels)
    _LOCAL.captures.append(capture)
    try:
        yield recorder
    finally:
        _LOCAL.captures.remove(capture)
        _uninstall()
