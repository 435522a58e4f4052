"""Helpers of benchmarks/operator_scale.py: a separate hack/cluster with an audit log, the two operators as
processes with their own identities, the workload (N equivalent jobs) and its measurements."""
