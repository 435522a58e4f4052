"""Closure sizes and the optimizer's step counter, in one process (no cluster)."""

from __future__ import annotations

import pytest

pytestmark = [pytest.mark.tf, pytest.mark.timeout(120)]


def test_closures_are_shortened_to_hit_a_boundary_exactly() -> None:
    from tfps_trainer.closures import closure_size

    sizes, step = [], 0
    while step < 45:
        sizes.append(closure_size(step, 45, 20))
        step += sizes[-1]
    assert sizes == [20, 20, 5] and step == 45
    assert closure_size(0, 3, 1) == 1


def test_keras3_step_counter_adds_atomically_and_syncs_to_the_global_step() -> None:
    import keras
    import tensorflow as tf

    from tfps_trainer.optimizer_step import count_atomically, sync

    var = keras.Variable(tf.zeros([2]))
    opt = keras.optimizers.Adam(0.1)
    opt.build([var])
    counter = count_atomically(opt)
    assert counter is opt._iterations and type(counter).__name__.startswith("AtomicCounter")
    for _ in range(3):
        opt.apply_gradients([(tf.ones([2]), var)])
    assert int(opt.iterations.numpy()) == 3
    assert sync(counter, 7) == 3 and int(opt.iterations.numpy()) == 7
    assert count_atomically(opt) is counter  # idempotent


def test_tf_keras_and_loss_scale_optimizers_are_not_reset() -> None:
    import keras
    import tf_keras

    from tfps_trainer.optimizer_step import count_atomically, sync

    assert count_atomically(tf_keras.optimizers.SGD(0.1)) is None
    assert count_atomically(keras.optimizers.LossScaleOptimizer(keras.optimizers.SGD(0.1))) is None
    assert sync(None, 5) is None


def test_worker_datasets_end_in_one_prefetch() -> None:
    import tensorflow as tf

    from tfps_trainer.chief import prefetched

    plain = tf.data.Dataset.range(10).batch(2)
    assert type(prefetched(plain)).__name__.lstrip("_") == "PrefetchDataset"
    already = plain.prefetch(2)
    assert prefetched(already) is already
    assert [b.tolist() for b in prefetched(plain).take(2).as_numpy_iterator()] == [[0, 1], [2, 3]]


def test_waiting_for_a_closure_does_not_copy_its_result_to_the_chief() -> None:
    """The chief bounds the closures in flight by waiting on the oldest; the coordinator's value must still
    carry the event it waits on (a TensorFlow upgrade without it would fall back to a remote copy)."""
    import threading

    from tensorflow.python.distribute.coordinator.values import RemoteValueImpl

    from tfps_trainer.chief import _wait_for

    class Recorded(RemoteValueImpl):
        fetches = 0

        def fetch(self):  # type: ignore[no-untyped-def]
            self.fetches += 1
            return super().fetch()

    value = Recorded(closure=None, type_spec=None)
    timer = threading.Timer(0.2, value._set_values, args=([1.0],))
    timer.start()
    _wait_for(value)
    assert value._status_available_event.is_set() and value.fetches == 0
    timer.join()

    aborted = RemoteValueImpl(closure=None, type_spec=None)
    aborted._set_aborted(RuntimeError("worker lost"))
    _wait_for(aborted)  # returns: the coordinator raises what matters at the next schedule or join
