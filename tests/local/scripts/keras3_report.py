"""A script-mode test program: the chief fits a Keras 3 model (no PSS), reports progress with
tfps_trainer.script.report, checkpoints with a CheckpointManager numbered by save count (so the step
must come from the optimizer's iterations inside the checkpoint), saves model.keras and samples.npz.
Every other task idles until it is stopped."""

import json
import os
import time

import numpy as np

task = json.loads(os.environ["TF_CONFIG"])["task"]["type"]
if task != "chief":
    while True:
        time.sleep(60)

import keras  # noqa: E402
import tensorflow as tf  # noqa: E402

from tfps_trainer.script import report  # noqa: E402

x = np.random.default_rng(0).normal(size=(256, 4)).astype("float32")
y = x.sum(axis=1, keepdims=True)
inp = keras.Input((4,), name="features")
model = keras.Model({"features": inp}, keras.layers.Dense(1, name="out")(inp))
opt = keras.optimizers.SGD(0.1)
model.compile(opt, "mse")
manager = tf.train.CheckpointManager(
    tf.train.Checkpoint(model=model, optimizer=opt), os.environ["TFPS_CHECKPOINT_DIR"], max_to_keep=2
)
for _ in range(3):
    history = model.fit({"features": x}, y, batch_size=32, epochs=1, verbose=0)
    report(step=int(opt.iterations.numpy()), loss=history.history["loss"][-1])
    print("saved", manager.save(), flush=True)
    time.sleep(2.5)
model.save(os.path.join(os.environ["TFPS_MODEL_DIR"], "model.keras"))
np.savez(os.environ["TFPS_SAMPLES_FILE"], features=x[:64])
