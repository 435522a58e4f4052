"""What the operator process loads: no CEL engine (the API server ran the CEL rules when it admitted a job)."""

from __future__ import annotations

import subprocess
import sys
import textwrap


def test_the_operator_process_loads_no_cel_engine():
    # `tfps operator` builds the CLI's parser (every subcommand's arguments), then imports the runner,
    # then (as it starts) the handlers, which import the controller; the controller parses each job's
    # spec. None of it may pull in celpy.
    code = textwrap.dedent("""
        import sys
        import tfps_operator.tools.cli, tfps_operator.runner, tfps_operator.handlers
        tfps_operator.tools.cli._parser().parse_args(["operator"])
        from tfps_operator.controller import parse_job
        parse_job({
            "apiVersion": "tfps.dev/v1alpha1",
            "kind": "PSTrainingJob",
            "metadata": {"name": "mnist", "namespace": "team-a"},
            "spec": {"model": {"module": "tfps_trainer.examples.linear"}, "training": {"steps": 10}},
        })
        loaded = sorted(m for m in sys.modules if m.split(".")[0] == "celpy")
        sys.exit(f"the operator process imported {loaded}" if loaded else 0)
    """)
    subprocess.run([sys.executable, "-c", code], check=True)


def test_tfps_validate_still_evaluates_the_cel_rules():
    code = "import sys, tfps_operator.api.validate; sys.exit(0 if 'celpy' in sys.modules else 'celpy not loaded')"
    subprocess.run([sys.executable, "-c", code], check=True)
