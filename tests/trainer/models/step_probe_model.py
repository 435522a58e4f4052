"""The linear problem with Adam under a learning-rate schedule that records the step it is called with.

The schedule writes the optimizer step it sees into ``probe.seen`` (a model weight, so on the PS and in
the checkpoint): the step a learning-rate schedule and Adam's bias correction were given at the last
update of the run.
"""

import keras
import tensorflow as tf

from tfps_trainer.examples import linear

dataset = linear.dataset
loss = linear.loss
input_signature = linear.input_signature

_probe: list = []


class StepProbe(keras.layers.Layer):
    def build(self, input_shape):
        self.seen = self.add_weight(name="seen", shape=(), dtype="int64", initializer="zeros", trainable=False)

    def call(self, x):
        return x


class RecordingSchedule(keras.optimizers.schedules.LearningRateSchedule):
    def __init__(self, learning_rate: float, decay_steps: int):
        self.learning_rate = learning_rate
        self.decay_steps = decay_steps

    def __call__(self, step):
        _probe[-1].seen.assign(tf.cast(step, "int64"))
        frac = tf.minimum(tf.cast(step, "float32") / self.decay_steps, 1.0)
        return self.learning_rate * (1.0 - 0.5 * frac)

    def get_config(self):
        return {"learning_rate": self.learning_rate, "decay_steps": self.decay_steps}


def build_model(args):
    d = int(args.get("features", 8))
    inputs = keras.Input(shape=(d,), name=linear.INPUT, dtype="float32")
    probe = StepProbe(name="probe")
    outputs = keras.layers.Dense(1, name="output")(probe(inputs))
    model = keras.Model(inputs={linear.INPUT: inputs}, outputs=outputs, name="step_probe")
    _probe.append(probe)
    return model


def optimizer(args):
    return keras.optimizers.Adam(learning_rate=RecordingSchedule(float(args.get("learning_rate", 0.01)), 1000))
