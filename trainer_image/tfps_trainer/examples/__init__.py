"""Built-in model modules implementing :mod:`tfps_trainer.contract`.

- :mod:`tfps_trainer.examples.linear`: small linear/MLP regression on deterministic synthetic data.
- :mod:`tfps_trainer.examples.wide_deep`: wide-and-deep with a large embedding table partitioned
  across the parameter servers.
"""
