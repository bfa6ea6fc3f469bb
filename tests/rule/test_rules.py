"""The table of rules: every rule's vectorized recompute against its scalar reference, on drawn steps with the
boundaries (r on its threshold, p = 0, q subnormal, k = 0), worked examples from the engines' semantics, and the
table's own promises (names, aliases, fields)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from specaccept_cli.rule import block, expected, registry, trees
from specaccept_cli.rule.registry import RULES, rule_named
from specaccept_cli.rule.scalar import accept_prefix, threshold
from specaccept_cli.rule.steps import ChainSteps, TreeSteps, offsets_of, tree_problem
from specaccept_cli.rule.vectorized import accept_prefix_batch

probability = st.floats(min_value=0.0, max_value=1.0, allow_nan=False)
positive = st.floats(min_value=5e-324, max_value=1.0, allow_nan=False)  # subnormal q included
# Probabilities where boundaries are likely: exact 0, 1, a subnormal, halves.
edgy = st.one_of(probability, st.sampled_from([0.0, 1.0, 5e-324, 0.5, 0.25]))
token = st.integers(0, 3)  # a tiny vocabulary: matches and mismatches both frequent

CHAIN_RULES = [rule for rule in RULES if rule.kind == "chain"]
TREE_RULES = [rule for rule in RULES if rule.kind == "tree"]


def chain_steps(steps: list[tuple[dict[str, list[float]], dict[str, float]]]) -> ChainSteps:
    names = steps[0][0].keys() if steps else ()
    columns = {}
    for name in names:
        dtype = np.int64 if "token" in name else np.float64
        columns[name] = np.array([value for fields, _ in steps for value in fields[name]], dtype=dtype)
    params = {name: np.array([p[name] for _, p in steps]) for name in (steps[0][1] if steps else {})}
    return ChainSteps(offsets_of([len(next(iter(f.values()), [])) for f, _ in steps]), columns, params)


@st.composite
def chain_step(
    draw: st.DrawFn, rule: registry.Rule, k: int | None = None
) -> tuple[dict[str, list[float]], dict[str, float]]:
    k = draw(st.integers(0, 12)) if k is None else k
    tie = draw(st.lists(st.booleans(), min_size=k, max_size=k))
    if rule.name in ("sample-match", "argmax"):
        draft = draw(st.lists(token, min_size=k, max_size=k))
        target = [d if same else t for d, same, t in zip(draft, tie, draw(st.lists(token, min_size=k, max_size=k)))]
        return {"draft_tokens": draft, "target_tokens": target}, {}
    p = draw(st.lists(edgy, min_size=k, max_size=k))
    r = draw(st.lists(edgy, min_size=k, max_size=k))
    if rule.name == "typical":
        entropy = draw(st.lists(st.floats(0.0, 12.0), min_size=k, max_size=k))
        epsilon, delta = draw(edgy), draw(edgy)
        from specaccept_cli.rule.chains import typical_threshold

        p = [typical_threshold(h, epsilon, delta) if t else x for h, t, x in zip(entropy, tie, p)]
        return {"p": p, "entropy": entropy}, {"epsilon": epsilon, "delta": delta}
    q = draw(st.lists(st.one_of(positive, st.sampled_from([5e-324, 1.0, 0.5])), min_size=k, max_size=k))
    if rule.name == "greedy-draft":
        return {"p": p, "r": [x if t else y for x, t, y in zip(p, tie, r)]}, {}
    if rule.name == "standard":
        return {"p": p, "q": q, "r": [threshold(a, b) if t else y for a, b, t, y in zip(p, q, tie, r)]}, {}
    residual = draw(st.lists(edgy, min_size=k, max_size=k))
    ratio, ties = 1.0, []
    for j in range(k):  # r exactly on h_j where asked: the inclusive boundary of the block test
        ratio = min(1.0, ratio * p[j] / q[j])
        ties.append(ratio if j == k - 1 else block.block_threshold(residual[j], ratio))
    r = [h if t else y for h, t, y in zip(ties, tie, r)]
    if k:
        residual[-1] = math.nan  # the last entry is null in a row: never read
    return {"p": p, "q": q, "r": r, "residual": residual}, {}


@pytest.mark.parametrize("rule", CHAIN_RULES, ids=lambda rule: rule.name)
@given(data=st.data())
def test_chain_vectorized_equals_scalar(rule: registry.Rule, data: st.DataObject) -> None:
    steps = data.draw(st.lists(chain_step(rule), min_size=1, max_size=8))
    assert rule.chain_scalar is not None
    expected = [rule.chain_scalar(fields, params) for fields, params in steps]
    assert rule.accepted(chain_steps(steps)).tolist() == expected


@given(st.lists(chain_step(rule_named("standard")), min_size=1, max_size=8))
def test_standard_is_the_seed_rule_bit_for_bit(steps: list[tuple[dict[str, list[float]], dict[str, float]]]) -> None:
    batch = chain_steps(steps)
    seed = [accept_prefix(f["p"], f["q"], f["r"]) for f, _ in steps]
    assert rule_named("standard").accepted(batch).tolist() == seed
    columns = batch.columns
    assert accept_prefix_batch(batch.offsets, columns["p"], columns["q"], columns["r"]).accepted.tolist() == seed


@st.composite
def tree_step(draw: st.DrawFn, rule: registry.Rule) -> tuple[list[int], dict[str, list[float]], dict[str, float]]:
    n = draw(st.integers(0, 14))
    parent = [draw(st.integers(-1, index - 1)) for index in range(n)]
    tie = draw(st.lists(st.booleans(), min_size=n, max_size=n))
    if rule.name in ("tree-argmax", "tree-match"):
        tokens = draw(st.lists(token, min_size=n, max_size=n))
        target = [x if t else y for x, t, y in zip(tokens, tie, draw(st.lists(token, min_size=n, max_size=n)))]
        return parent, {"token": tokens, "target_token": target}, {}
    p = draw(st.lists(edgy, min_size=n, max_size=n))
    if rule.name == "tree-residual":
        q = draw(st.lists(positive, min_size=n, max_size=n))
        r = [threshold(a, b) if t else y for a, b, t, y in zip(p, q, tie, draw(st.lists(edgy, min_size=n, max_size=n)))]
        return parent, {"p": p, "q": q, "r": r}, {}
    single = draw(st.one_of(st.just(1.0), edgy))
    acc = draw(st.one_of(st.just(1.0), edgy))
    coin = draw(st.lists(edgy, min_size=n, max_size=n))
    for index in range(n):  # one coin per parent, as SGLang draws it; sometimes exactly on the summed p
        first = parent.index(parent[index])
        if tie[index]:
            siblings = [s for s in range(index + 1) if parent[s] == parent[index]]
            coin[first] = sum((p[s] for s in siblings), 0.0) / max(acc, trees.THRESHOLD_ACC_FLOOR)
        coin[index] = coin[first]
    if n and draw(st.booleans()):
        single = p[0]  # p exactly on threshold_single
    return parent, {"p": p, "coin": coin}, {"threshold_single": single, "threshold_acc": acc}


def tree_steps(steps: list[tuple[list[int], dict[str, list[float]], dict[str, float]]]) -> TreeSteps:
    names = list(steps[0][1]) if steps else []
    columns = {
        name: np.array([v for _, f, _ in steps for v in f[name]], dtype=np.int64 if "token" in name else np.float64)
        for name in names
    }
    params = {name: np.array([p[name] for _, _, p in steps]) for name in (steps[0][2] if steps else {})}
    parent = np.array([v for par, _, _ in steps for v in par], dtype=np.int64)
    return TreeSteps(offsets_of([len(par) for par, _, _ in steps]), parent, columns, params)


@pytest.mark.parametrize("rule", TREE_RULES, ids=lambda rule: rule.name)
@given(data=st.data())
def test_tree_vectorized_equals_scalar(rule: registry.Rule, data: st.DataObject) -> None:
    steps = data.draw(st.lists(tree_step(rule), min_size=1, max_size=6))
    assert rule.tree_scalar is not None
    expected = [rule.tree_scalar(parent, fields, params) for parent, fields, params in steps]
    assert rule.accepted(tree_steps(steps)).tolist() == expected


# --- worked examples -------------------------------------------------------------------------------------


def decide(name: str, fields: dict[str, list[float]], params: dict[str, float]) -> int:
    routine = rule_named(name).chain_scalar
    assert routine is not None
    return routine(fields, params)


def test_greedy_draft_ignores_q() -> None:
    fields = {"p": [0.3, 0.3], "q": [0.1, 0.1], "r": [0.3, 0.31]}
    assert decide("greedy-draft", fields, {}) == 1
    assert decide("standard", fields, {}) == 2


def test_block_keeps_the_longest_passing_prefix_not_the_first_rejection() -> None:
    # position 0 fails its own test (r above h_0) but position 1 passes: block keeps 2, the chain rule 0
    fields = {"p": [0.2, 0.9], "q": [0.5, 0.3], "r": [0.9, 0.3], "residual": [0.25, math.nan]}
    ratio0 = 0.2 / 0.5
    assert block.block_threshold(0.25, ratio0) == pytest.approx(0.25 / (0.25 + 0.6))
    assert block.block_scalar(fields, {}) == 2  # w_1 = min(1, 0.4 * 0.9 / 0.3) = 1 >= 0.3
    assert accept_prefix(fields["p"], fields["q"], fields["r"]) == 0
    assert rule_named("block").accepted(chain_steps([(fields, {})])).tolist() == [2]


def test_block_threshold_is_one_when_nothing_is_left() -> None:
    assert block.block_threshold(0.0, 1.0) == 1.0  # 0 / 0: the engine takes 1


def test_typical_is_strict() -> None:
    fields = {"p": [0.09], "entropy": [0.0]}
    assert decide("typical", fields, {"epsilon": 0.09, "delta": 0.3}) == 0
    fields = {"p": [0.0901], "entropy": [0.0]}
    assert decide("typical", fields, {"epsilon": 0.09, "delta": 0.3}) == 1


SGLANG_TREE = [-1, -1, 0, 0, 2]  # two depth-1 siblings; node 0 has children 2 and 3; node 2 has child 4


def test_tree_target_cdf_sums_the_tried_siblings() -> None:
    params = {"threshold_single": 1.0, "threshold_acc": 1.0}
    # coin 0.5: node 0 (p 0.3) fails, node 1 passes on 0.3 + 0.25 = 0.55; node 1 has no children -> depth 1
    fields = {"p": [0.3, 0.25, 0.9, 0.1, 0.5], "coin": [0.5, 0.5, 0.1, 0.1, 0.7]}
    assert trees.target_cdf_scalar(SGLANG_TREE, fields, params) == 1
    # coin 0.2 at the root: node 0 passes; its children share coin 0.1: node 2 passes; node 4 (p 0.5) < 0.7 fails
    fields["coin"] = [0.2, 0.2, 0.1, 0.1, 0.7]
    assert trees.target_cdf_scalar(SGLANG_TREE, fields, params) == 2
    fields["coin"][4] = 0.5  # inclusive: coin == p passes
    assert trees.target_cdf_scalar(SGLANG_TREE, fields, params) == 3
    # threshold_single below 1: a child with p >= it is kept whatever the coin
    lowered = {**params, "threshold_single": 0.3}
    assert trees.target_cdf_scalar(SGLANG_TREE, {**fields, "coin": [0.99] * 5}, lowered) == 3


def test_tree_walk_follows_only_the_accepted_child() -> None:
    # node 1 would pass but its sibling 0 passed first: the walk goes into 0's subtree only
    fields = {"token": [7, 8, 9, 5, 6], "target_token": [7, 8, 9, 9, 1]}
    assert trees.token_match_scalar(SGLANG_TREE, fields, {}) == 2  # 0 then 2; 4 mismatches
    steps = TreeSteps(offsets_of([5]), np.array(SGLANG_TREE), {k: np.array(v) for k, v in fields.items()})
    assert rule_named("tree-match").accepted(steps).tolist() == [2]


def test_tree_problem_names_a_parent_listed_after_its_child() -> None:
    assert tree_problem([-1, 0, 1]) is None
    assert tree_problem([-1, 2, 0]) == "nodes[1].parent = 2 is not -1 or the index of an earlier node"
    assert tree_problem([0]) is not None


def test_empty_steps() -> None:
    for rule in CHAIN_RULES:
        fields = {name: [] for name in rule.fields}
        params = {param.name: 0.5 for param in rule.params}
        assert rule.chain_scalar is not None and rule.chain_scalar(fields, params) == 0
    for rule in TREE_RULES:
        assert rule.tree_scalar is not None and rule.tree_scalar([], {name: [] for name in rule.fields}, {}) == 0


# --- the table -----------------------------------------------------------------------------------------------


def test_the_issue_names_are_all_in_the_table() -> None:
    names = {
        "standard", "greedy-draft", "sample-match", "block", "typical", "argmax",
        "tree-residual", "tree-target-cdf", "tree-argmax", "tree-match",
    }  # fmt: skip
    assert {rule.name for rule in RULES} == names


def test_names_and_aliases_are_unique_and_found_loosely() -> None:
    every = [name for rule in RULES for name in rule.names]
    assert len(every) == len(set(every))
    assert rule_named("Tree_Target_CDF").name == "tree-target-cdf"
    assert rule_named(" GREEDY ").name == "argmax"
    with pytest.raises(KeyError, match=r"unknown rule 'strict'.*standard, greedy-draft"):
        rule_named("strict")


def test_every_rule_has_its_routines_engines_and_a_lossless_condition() -> None:
    for rule in RULES:
        scalar, batch = (
            (rule.chain_scalar, rule.chain_batch)
            if rule.kind == "chain"
            else (
                rule.tree_scalar,
                rule.tree_batch,
            )
        )
        assert scalar is not None and batch is not None, rule.name
        assert rule.engines and all(engine.source for engine in rule.engines), rule.name
        assert rule.lossless_when, rule.name
        assert (rule.model == "tree") == (rule.kind == "tree"), rule.name
    assert rule_named("block").model == "at-least-chain"
    assert [rule.name for rule in RULES if rule.lossless == "never"] == ["typical"]


def test_tree_match_keeps_the_longest_matching_path_where_tree_argmax_takes_the_first_match() -> None:
    """A token repeated among siblings: SGLang's greedy walk stops in the first one's subtree, TensorRT-LLM compares
    every path and keeps the longer match."""
    parent = [-1, -1, 1]
    fields = {"token": [7, 7, 5], "target_token": [7, 7, 5]}
    assert trees.token_match_scalar(parent, fields, {}) == 1
    assert trees.longest_match_scalar(parent, fields, {}) == 2
    steps = TreeSteps(offsets_of([3, 3]), np.array(parent * 2), {k: np.array(v * 2) for k, v in fields.items()})
    assert rule_named("tree-argmax").accepted(steps).tolist() == [1, 1]
    assert rule_named("tree-match").accepted(steps).tolist() == [2, 2]


# --- the expected-tokens model -------------------------------------------------------------------------------


@given(st.floats(0.0, 1.0), st.integers(0, 64))
def test_the_chain_model_is_the_seed_formula_and_the_per_depth_sum(alpha: float, k: int) -> None:
    from specaccept_cli.summary.formulas import expected_tokens_per_pass

    assert expected.chain_tokens_per_pass(alpha, k) == expected_tokens_per_pass(alpha, k)
    assert expected.tokens_per_pass([alpha] * k) == pytest.approx(expected.chain_tokens_per_pass(alpha, k), rel=1e-9)


def test_per_depth_rates_from_an_accepted_depth_histogram() -> None:
    histogram = [10, 20, 30, 40]  # 100 steps: 90 reached depth 1, 70 depth 2, 40 depth 3
    rates = expected.conditional_rates(histogram)
    assert rates == [0.9, 70 / 90, 40 / 70]
    mean_depth = sum(depth * count for depth, count in enumerate(histogram)) / 100
    assert expected.tokens_per_pass([rate for rate in rates if rate is not None]) == pytest.approx(1 + mean_depth)
    assert expected.conditional_rates([5, 0, 0]) == [0.0, None]  # nobody reached depth 1: depth 2's rate unknown


# --- the row contract ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "fields", "params", "parent", "message"),
    [
        ("standard", {"p": [0.5], "q": [0.5]}, {}, None, "rule 'standard' needs 'r'"),
        ("typical", {"p": [0.5], "entropy": [1.0]}, {"delta": 0.3}, None, "rule 'typical' needs 'epsilon'"),
        ("standard", {"p": [0.5, 0.5], "q": [0.5], "r": [0.1]}, {}, None, "differ in length (p 2, q 1, r 1)"),
        ("standard", {"p": [0.5], "q": [0.0], "r": [0.1]}, {}, None, "q[0] = 0.0 is zero: a drafted token always"),
        ("greedy-draft", {"p": [1.5], "r": [0.1]}, {}, None, "p[0] = 1.5 is out of range (p must be in [0, 1])"),
        ("sample-match", {"draft_tokens": [1, -2], "target_tokens": [1, 2]}, {}, None, "draft_tokens[1] = -2 is not"),
        ("argmax", {"draft_tokens": [True], "target_tokens": [1]}, {}, None, "draft_tokens[0] = true is not a token"),
        ("block", {"p": [0.5], "q": [0.5], "r": [0.5], "residual": [None]}, {}, None, None),  # last residual null
        ("block", {"p": [0.5] * 2, "q": [0.5] * 2, "r": [0.5] * 2, "residual": [None, None]}, {}, None, "residual[0]"),
        ("typical", {"p": [0.5], "entropy": [-1.0]}, {"epsilon": 0.1, "delta": 0.3}, None, "entropy[0] = -1.0 is"),
        ("typical", {"p": [0.5], "entropy": [1.0]}, {"epsilon": math.inf, "delta": 0.3}, None, "'epsilon' is inf"),
        ("tree-target-cdf", {"p": [0.5], "coin": [1.5]}, {}, [-1], "nodes[0].coin = 1.5 is out of range (coin must"),
        ("tree-target-cdf", {"p": [0.5, 0.5], "coin": [0.5, 0.5]}, {}, [-1, 1], "nodes[1].parent = 1 is not"),
        ("tree-match", {"token": ["a"], "target_token": [1]}, {}, [-1], "nodes[0].token = 'a' is not a token id"),
        (
            "tree-residual",
            {"p": [0.5], "q": [0.5], "r": [0.5]},
            {},
            [-1, -1],
            "differ in length (p 1, q 1, r 1, parent 2)",
        ),
    ],
)
def test_a_step_that_breaks_its_rules_contract_is_named(
    name: str, fields: dict[str, list[object]], params: dict[str, float], parent: list[int] | None, message: str | None
) -> None:
    from specaccept_cli.rule.contract import step_problem

    problem = step_problem(rule_named(name), fields, params, parent)  # type: ignore[arg-type]
    if message is None:
        assert problem is None
    else:
        assert problem is not None and message in problem, problem


def test_every_rule_accepts_a_valid_step() -> None:
    from specaccept_cli.rule.contract import missing_fields, step_problem

    for rule in RULES:
        fields = {name: [1] if "token" in name else [0.5] for name in rule.fields}
        params = {param.name: 0.5 for param in rule.params}
        parent = [-1] if rule.kind == "tree" else None
        if rule.name == "block":
            fields["residual"] = [math.nan]
        assert step_problem(rule, fields, params, parent) is None, rule.name
        assert missing_fields(rule, set(fields) | set(params)) == []


@given(st.integers(1, 6), st.data())
def test_block_one_draft_length_path_equals_the_scalar(k: int, data: st.DataObject) -> None:
    """Batches of a single draft length take a 2-d path through the running ratio: the same doubles."""
    rule = rule_named("block")
    steps = data.draw(st.lists(chain_step(rule, k), min_size=2, max_size=6))
    assert rule.accepted(chain_steps(steps)).tolist() == [block.block_scalar(f, p) for f, p in steps]


def test_wide_sibling_lists_sum_one_sibling_at_a_time_as_the_scalar_does() -> None:
    """Parents with hundreds of children (past the ranks summed across the batch at once): the same doubles as
    adding one sibling at a time, and the same decisions as the scalar routine, coins sitting on the sums."""
    rng = np.random.default_rng(3)
    steps = []
    for width in (1, 31, 32, 33, 64, 300):
        parent = [-1] * width + [0] * width + [width] * 3  # depth 1, node 0's children, node width's children
        p = (rng.random(len(parent)) / len(parent)).tolist()
        coin = [float(rng.random())] * len(parent)
        tie = int(rng.integers(0, width))
        coin[:width] = [sum(p[: tie + 1], 0.0)] * width  # sits exactly on the (tie + 1)-th sibling's sum
        steps.append((parent, {"p": p, "coin": coin}, {"threshold_single": 1.0, "threshold_acc": 1.0}))
    batch = tree_steps(steps)
    sums = trees.sibling_sums(trees._parent_keys(batch), batch.columns["p"])
    for (parent, fields, _), start in zip(steps, batch.offsets[:-1].tolist()):
        running: dict[int, float] = {}
        for index, up in enumerate(parent):
            running[up] = running.get(up, 0.0) + fields["p"][index]
            assert sums[start + index] == running[up]
    rule = rule_named("tree-target-cdf")
    assert rule.tree_scalar is not None
    assert rule.accepted(batch).tolist() == [rule.tree_scalar(*step) for step in steps]


@pytest.mark.parametrize("rule", TREE_RULES, ids=lambda rule: rule.name)
def test_large_trees_of_every_shape_walk_as_the_scalar_does(rule: registry.Rule) -> None:
    """Trees of up to 300 nodes, deep chains, wide stars and random shapes in one batch: the vectorized walk
    (level by level over the walks still going) decides every step as the scalar routine does."""
    rng = np.random.default_rng(17)
    steps = []
    for index in range(120):
        n = int(rng.integers(1, 300))
        shape = index % 3
        if shape == 0:
            parent = [node - 1 for node in range(n)]  # a chain
        elif shape == 1:
            parent = [-1] * (n // 2) + [int(rng.integers(0, n // 2 or 1)) for _ in range(n - n // 2)]
            parent = [up if up < position else -1 for position, up in enumerate(parent)]
        else:
            parent = [int(rng.integers(-1, position)) for position in range(n)]
        if rule.name in ("tree-argmax", "tree-match"):
            target = rng.integers(0, 2, n).tolist()
            fields: dict[str, list[float]] = {
                "token": [t if rng.random() < 0.9 else 1 - t for t in target],
                "target_token": target,
            }
            params: dict[str, float] = {}
        elif rule.name == "tree-residual":
            fields = {
                "p": rng.random(n).tolist(),
                "q": (1.0 - rng.random(n)).tolist(),
                "r": (rng.random(n) * 0.3).tolist(),
            }
            params = {}
        else:
            fields = {"p": (rng.random(n) / 8).tolist(), "coin": (rng.random(n) * 0.3).tolist()}
            params = {"threshold_single": 1.0, "threshold_acc": 1.0}
        steps.append((parent, fields, params))
    assert rule.tree_scalar is not None
    assert rule.accepted(tree_steps(steps)).tolist() == [rule.tree_scalar(*step) for step in steps]
