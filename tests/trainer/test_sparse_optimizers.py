"""tfps_trainer.optimizers: each sparse update against its dense counterpart, in one process.

The dense counterpart is the Keras 3 optimizer of the same name given the same gradient as a dense
tensor (duplicate ids summed, as TensorFlow's gradient of a gather sums them). The sparse update must
give the same rows the batch used (within float rounding, scaled to the values), leave every other
row of the table and of each slot bit-identical, and run one sparse kernel (or scatter ops), never an
op over the whole table. The cluster test (test_trainer_wide_deep) proves the same on the PS.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from graph_ops import all_ops

pytestmark = [pytest.mark.tf, pytest.mark.timeout(300)]
np = pytest.importorskip("numpy")
tf = pytest.importorskip("tensorflow")
keras = pytest.importorskip("keras")

from tfps_trainer import optimizers as O  # noqa: E402
from tfps_trainer.checkpoints import Layouts  # noqa: E402

V, D = 1000, 4
INIT = np.random.default_rng(0).normal(size=(V, D)).astype(np.float32)
ALL_ROWS = [*range(V), 3, 3, 7]  # every row, two of them twice
FEW_ROWS = [3, 3, 7, 900]

CASES: dict[str, tuple[Callable[[], Any], Callable[[], Any], str]] = {
    "adagrad": (lambda: O.Adagrad(0.1), lambda: keras.optimizers.Adagrad(0.1), "ResourceSparseApplyAdagradV2"),
    "sgd momentum": (
        lambda: O.SGD(0.1, momentum=0.9),
        lambda: keras.optimizers.SGD(0.1, momentum=0.9),
        "ResourceSparseApplyKerasMomentum",
    ),
    "sgd nesterov": (
        lambda: O.SGD(0.1, momentum=0.9, nesterov=True),
        lambda: keras.optimizers.SGD(0.1, momentum=0.9, nesterov=True),
        "ResourceSparseApplyKerasMomentum",
    ),
    "lazy adam": (lambda: O.LazyAdam(0.01), lambda: keras.optimizers.Adam(0.01), "ResourceScatterUpdate"),
    "ftrl": (
        lambda: O.Ftrl(0.1, l1_regularization_strength=0.01, l2_regularization_strength=0.01, beta=0.1),
        lambda: keras.optimizers.Ftrl(0.1, l1_regularization_strength=0.01, l2_regularization_strength=0.01, beta=0.1),
        "ResourceSparseApplyFtrlV2",
    ),
}


def _train(opt: Any, rows: list[int], dense: bool = False, steps: int = 3) -> tuple[Any, list[Any], set[str], bool]:
    """``steps`` updates of a [V, D] table with gradients on ``rows``; the table, the slots, the op types
    of the traced step and whether any op of it produced a tensor of the table's V rows."""
    var = keras.Variable(INIT.copy())
    opt.build([var])
    before = [np.array(s.numpy()) for s in opt.variables[1:]]

    @tf.function
    def step(values: Any) -> None:
        grad = tf.IndexedSlices(values, tf.constant(rows), tf.constant([V, D]))
        opt.apply_gradients([(tf.convert_to_tensor(grad) if dense else grad, var)])

    rng = np.random.default_rng(1)
    for _ in range(steps):
        step(tf.constant(rng.normal(size=(len(rows), D)).astype(np.float32)))
    graph = step.get_concrete_function(tf.TensorSpec([len(rows), D], tf.float32)).graph
    types = {op.type for op in graph.get_operations()}
    whole = any(out.shape.rank and out.shape.as_list()[0] == V for op in graph.get_operations() for out in op.outputs)
    slots = [s.numpy() for s in opt.variables[1:]]
    return var.numpy(), [*slots, *before], types, bool(whole)


@pytest.mark.parametrize("name", list(CASES))
def test_sparse_update_matches_the_dense_one_and_touches_only_the_batch_rows(name: str) -> None:
    sparse, dense, kernel = CASES[name]
    table, state, _, _ = _train(sparse(), ALL_ROWS)
    want, want_state, _, _ = _train(dense(), ALL_ROWS, dense=True)
    n = len(state) // 2
    for got, ref in [(table, want), *zip(state[:n], want_state[:n])]:
        scale = max(1.0, float(np.max(np.abs(ref))))
        np.testing.assert_allclose(got, ref, rtol=0, atol=2e-5 * scale)

    table, state, types, whole = _train(sparse(), FEW_ROWS)
    assert kernel in types and not whole, (sorted(types), whole)
    others = [i for i in range(V) if i not in FEW_ROWS]
    assert np.array_equal(table[others], INIT[others])
    assert not np.array_equal(table[FEW_ROWS], INIT[FEW_ROWS])
    for after, before in zip(state[:n], state[n:]):
        if after.shape and after.shape[0] == V:  # a per-row slot (not a scalar)
            assert np.array_equal(after[others], before[others])


def test_keras_dense_updates_are_what_the_sparse_classes_replace() -> None:
    """The premise, measured: Keras 3's Adagrad reads the whole accumulator each step (and is swapped by
    the trainer, same result); SGD without momentum is sparse already; Adam is dense, with a hint."""
    assert _train(keras.optimizers.Adagrad(0.1), FEW_ROWS)[3]
    assert not _train(keras.optimizers.SGD(0.1), FEW_ROWS)[3]
    assert O.updates_sparsely(keras.optimizers.SGD(0.1)) is True
    assert O.updates_sparsely(keras.optimizers.SGD(0.1, momentum=0.9)) is False

    opt = keras.optimizers.Adagrad(0.1)
    assert O.sparse_equivalent(opt) is keras.optimizers.Adagrad and type(opt) is O.Adagrad
    assert "same result" in O.describe(opt, keras.optimizers.Adagrad)
    adam = keras.optimizers.Adam(0.01)
    assert O.sparse_equivalent(adam) is None and type(adam) is keras.optimizers.Adam
    assert "LazyAdam" in O.describe(adam) and "O(vocabulary)" in O.describe(adam)
    assert O.describe(O.LazyAdam(0.01)).endswith("only the rows a batch used")

    class Mine(keras.optimizers.Adagrad):  # a user's subclass is used as it is
        pass

    assert O.sparse_equivalent(Mine(0.1)) is None


def test_lazy_adam_refuses_amsgrad() -> None:
    with pytest.raises(ValueError, match="amsgrad"):
        O.LazyAdam(amsgrad=True).build([keras.Variable(INIT.copy())])


def test_checkpoint_layouts_restore_by_what_the_checkpoint_holds(tmp_path: Any) -> None:
    """A checkpoint holding the optimizer by model variable restores with that layout; one of the earlier
    layout (the optimizer as it is) with the earlier one."""
    state = tf.Module()  # plain SGD: a step counter and no slots
    state.iterations = tf.Variable(0, dtype=tf.int64)
    state.slots = {}
    current = tf.train.Checkpoint(optimizer=state)
    earlier = tf.train.Checkpoint(optimizer=tf.Module())
    earlier.optimizer._iterations = tf.Variable(0, dtype=tf.int64)
    layouts = Layouts(current, earlier=earlier)
    assert layouts.for_path(current.save(str(tmp_path / "new"))) is current
    assert layouts.for_path(earlier.save(str(tmp_path / "old"))) is earlier
    assert Layouts(current).for_path(str(tmp_path / "old-1")) is current


def _library_verdicts() -> list[tuple[str, Callable[[], Any], bool]]:
    import tf_keras

    k, t, legacy = keras.optimizers, tf_keras.optimizers, tf_keras.optimizers.legacy
    return [  # (name, make, sparse): the table in trainer_image/README.md ("Sparse updates")
        ("keras SGD", lambda: k.SGD(0.1), True),
        ("keras SGD momentum", lambda: k.SGD(0.1, momentum=0.9), False),
        ("keras Adagrad", lambda: k.Adagrad(0.1), False),
        ("keras Adam", lambda: k.Adam(), False),
        ("keras Ftrl", lambda: k.Ftrl(), False),
        ("keras RMSprop", lambda: k.RMSprop(), False),
        ("tf_keras SGD", lambda: t.SGD(0.1), False),
        ("tf_keras SGD momentum", lambda: t.SGD(0.1, momentum=0.9), False),
        ("tf_keras Adagrad", lambda: t.Adagrad(0.1), True),
        ("tf_keras Adam", lambda: t.Adam(), False),
        ("tf_keras Ftrl", lambda: t.Ftrl(), False),
        ("tf_keras legacy SGD momentum", lambda: legacy.SGD(0.1, momentum=0.9), True),
        ("tf_keras legacy Adagrad", lambda: legacy.Adagrad(0.1), True),
        ("tf_keras legacy Adam", lambda: legacy.Adam(), False),
        ("tf_keras legacy Ftrl", lambda: legacy.Ftrl(), True),
    ]


def _whole_table_ops(opt: Any, keras_variable: bool) -> set[str]:
    """Op types of one traced update of rows 3 and 7 that produce a tensor of the table's V rows (nested
    function graphs included: tf_keras wraps its updates)."""
    init = np.ones((V, D), np.float32)
    var = keras.Variable(init) if keras_variable else tf.Variable(init)

    @tf.function
    def step(values: Any) -> None:
        opt.apply_gradients([(tf.IndexedSlices(values, tf.constant([3, 7]), tf.constant([V, D])), var)])

    step(tf.ones([2, D]))

    return {
        op.type
        for f in step._list_all_concrete_functions()
        for op in all_ops(f.graph)
        for out in op.outputs
        if out.shape.rank and out.shape.as_list()[0] == V
    }


def test_the_documented_verdicts_on_keras_and_tf_keras_optimizers_hold() -> None:
    """Which library optimizers update an embedding sparsely (as documented for script mode)."""
    got = {name: not _whole_table_ops(make(), name.startswith("keras ")) for name, make, _ in _library_verdicts()}
    assert got == {name: sparse for name, _, sparse in _library_verdicts()}
