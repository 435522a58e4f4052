"""``ShardedEmbedding(spread_rows=True)`` on a real ShardedVariable: the wide-and-deep example's skewed ids
reach its 4 shards (4 PS, ParameterServerStrategy) about equally, each shard's gradient is
``IndexedSlices`` holding exactly the positions ``tfps_trainer.row_spread`` gives; with ``spread_rows``
false, half the lookups go to the first shard. Also the layer's config, weights and errors in one process."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

pytestmark = [pytest.mark.tf, pytest.mark.timeout(200)]
np = pytest.importorskip("numpy")
tf = pytest.importorskip("tensorflow")
keras = pytest.importorskip("keras")

from tfps_trainer import row_spread  # noqa: E402
from tfps_trainer.layers import ShardedEmbedding, spread_table, unspread_table  # noqa: E402

PROBE = Path(__file__).with_name("spread_probe.py")


def _shares(report: dict) -> list[float]:
    counts = [len(s["positions"]) for s in report["shards"]]
    return [n / sum(counts) for n in counts]


def test_skewed_ids_reach_every_shard_about_equally_and_each_gradient_stays_sparse() -> None:
    out = subprocess.run(
        [sys.executable, str(PROBE)],
        env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"},
        capture_output=True,
        text=True,
        timeout=180,
    )
    reports = [json.loads(ln[len("SPREAD ") :]) for ln in out.stdout.splitlines() if ln.startswith("SPREAD ")]
    assert out.returncode == 0 and len(reports) == 2, out.stdout[-2000:] + out.stderr[-3000:]
    contiguous, spread = reports
    assert contiguous["ids"] == spread["ids"] and len(spread["ids"]) == 8192
    for report in reports:
        # 4 shards of 25,000 rows, one on each PS, each with a sparse gradient of one index per lookup
        assert [s["rows"] for s in report["shards"]] == [25_000] * 4
        assert sorted(s["device"].split("/device:")[0] for s in report["shards"]) == [
            f"/job:ps/replica:0/task:{i}" for i in range(4)
        ]
        assert [s["gradient"] for s in report["shards"]] == ["IndexedSlices"] * 4

    # Contiguous rows (Embedding's order): the lowest, hottest ids are all on ps-0 (share √(1/4) = 0.5).
    assert Counter(p for s in contiguous["shards"] for p in s["positions"]) == Counter(contiguous["ids"])
    assert _shares(contiguous)[0] > 0.45, _shares(contiguous)
    # Spread rows: the lookups went to the rows row_spread places the ids at, about a quarter per shard.
    want = Counter(row_spread.position(i, 100_000) for i in spread["ids"])
    assert Counter(p for s in spread["shards"] for p in s["positions"]) == want
    assert all(0.22 < share < 0.28 for share in _shares(spread)), _shares(spread)


def test_spread_layer_config_weights_and_out_of_range_ids(tmp_path: Path) -> None:
    vocab = 997  # prime
    plain = ShardedEmbedding(vocab, 3)
    spread = ShardedEmbedding(vocab, 3, spread_rows=True)
    ids = np.array([[0, 1, 2, 996], [5, 6, 7, 8]], np.int32)
    plain(ids), spread(ids)
    table = plain.get_weights()[0]
    spread.set_weights([spread_table(table)])
    np.testing.assert_array_equal(spread(ids), plain(ids))
    np.testing.assert_array_equal(unspread_table(spread.get_weights()[0]), table)
    assert not np.array_equal(spread.get_weights()[0], table)  # the stored order differs
    np.testing.assert_array_equal(
        spread.positions(tf.constant(ids)).numpy(), [[row_spread.position(int(i), vocab) for i in r] for r in ids]
    )

    # config: the flag round-trips through a saved .keras model, outside any partitioned job
    model = keras.Sequential([keras.Input((4,), dtype="int32"), spread])
    path = tmp_path / "m.keras"
    model.save(path)
    loaded = keras.saving.load_model(path)
    assert loaded.layers[0].get_config()["spread_rows"] is True
    np.testing.assert_array_equal(loaded(ids), plain(ids))
    assert plain.get_config()["spread_rows"] is False

    # an id outside [0, vocab) still fails (it is not folded onto a real row)
    for bad in (-1, vocab, 3 * vocab + 2):
        with pytest.raises(tf.errors.InvalidArgumentError):
            spread(np.array([[bad]], np.int32))
    with pytest.raises(ValueError, match="input_dim"):
        ShardedEmbedding(row_spread.MAX_VOCAB + 1, 1, spread_rows=True)
    with pytest.raises(TypeError, match="spread_rows"):
        ShardedEmbedding(10, 1, spread_rows="yes")


def test_int64_positions_survive_savedmodel_tflite_and_onnx_at_the_largest_vocabulary(tmp_path: Path) -> None:
    """The exporter's own SavedModel, TFLite and ONNX conversions of the id -> position arithmetic, at
    the largest vocabulary, where a product (~5.7e18) overflows int32 and loses digits in float64."""
    import onnxruntime as ort
    from ai_edge_litert.interpreter import Interpreter

    from tfps_trainer.export import formats
    from tfps_wire.job_settings import ExportSettings

    vocab = row_spread.MAX_VOCAB

    class Positions(tf.Module):
        embedding = ShardedEmbedding(vocab, 1, spread_rows=True)  # positions only: no table is built

        def __call__(self, ids: Any, training: bool = False) -> Any:
            return self.embedding.positions(ids)

    ids = np.array([[0, 1, 2, 2**31 + 5], [123_456_789, vocab - 3, vocab - 2, vocab - 1]], np.int64)
    want = np.array([[row_spread.position(int(i), vocab) for i in row] for row in ids], np.int64)
    assert int(want.max()) > 2**31 and (vocab - 1) * row_spread.multiplier(vocab) > 2**53

    sig = {"ids": tf.TensorSpec([None, 4], tf.int64, name="ids")}
    serve = formats.serving(Positions(), sig, {"ids": ids}, as_dict=False)
    np.testing.assert_array_equal(formats.reference(serve, {"ids": ids})[serve.output_names[0]], want)
    formats.savedmodel(Positions(), serve, tmp_path / "savedmodel")
    formats.tflite(tmp_path / "savedmodel", tmp_path / "m.tflite")
    formats.onnx(tmp_path / "savedmodel", tmp_path / "m.onnx", ExportSettings().onnx_opset, serve)

    runner = Interpreter(model_path=str(tmp_path / "m.tflite")).get_signature_runner("serving_default")
    np.testing.assert_array_equal(next(iter(runner(ids=ids).values())), want)
    sess = ort.InferenceSession(str(tmp_path / "m.onnx"), providers=["CPUExecutionProvider"])
    np.testing.assert_array_equal(sess.run(None, {"ids": ids})[0], want)
    loaded = tf.saved_model.load(str(tmp_path / "savedmodel")).signatures["serving_default"]
    np.testing.assert_array_equal(next(iter(loaded(ids=tf.constant(ids)).values())).numpy(), want)
