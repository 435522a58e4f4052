"""Verified export: ``python -m tfps_trainer.export`` (see :mod:`.__main__`).

Modules, one job each:
    result     the termination-message schema (TF-free; the operator imports it; exit codes:
               tfps_wire.exitcodes)
    errors     ExportError(reason, message)
    safepaths  refusal of paths escaping the job root, ``..`` and symlinks
    source     checkpoint lookup, model restore, real input samples
    formats    SavedModel / TFLite / ONNX converters and the serving interface
    size_limits  the 2 GiB of TFLite and ONNX: a larger model is refused before conversion
    verify     running each artifact in its runtime and comparing with TensorFlow
    manifest   manifest.json (sizes, hashes, interface, errors, versions)
    publish    staging directory, fsync, atomic rename, ``latest``
    pipeline   the sequence of the above

This package's ``__init__`` imports nothing so that ``tfps_wire.export_result`` stays TF-free.
"""
