"""The chief's success summary: written by the trainer, read by the operator (TF-free both ways)."""

from tfps_wire.termination import FinalCheckpoint, format_success, parse_success


def test_summary_round_trips_with_and_without_a_checkpoint():
    assert parse_success(format_success(300, 300, "/tfps/ns/job/checkpoints/ckpt-300")) == FinalCheckpoint(
        300, 300, "/tfps/ns/job/checkpoints/ckpt-300"
    )
    assert parse_success(format_success(5, 10, None)) == FinalCheckpoint(5, 10, None)


def test_summary_is_read_from_the_last_line_and_anything_else_is_not_one():
    assert parse_success("warming up\ncompleted step 7/7; final checkpoint /c/ckpt-7\n").step == 7
    for other in (
        "",
        "lost parameter server ps/0 (UnavailableError)",
        "completed step x/7; final checkpoint /c",
        "completed step 7/7; final checkpoint /c/ckpt-7\nthen something else",
    ):
        assert parse_success(other) is None


def test_the_chiefs_termination_line_as_written_is_parsed():
    """The chief writes its summary behind its role (what the operator reads from the pod)."""
    from tfps_wire.termination import termination_line

    line = termination_line("chief/0", format_success(300, 300, "/tfps/ns/j/checkpoints/ckpt-300"))
    assert line.startswith("tfps-trainer chief/0: ")
    assert parse_success(line) == FinalCheckpoint(300, 300, "/tfps/ns/j/checkpoints/ckpt-300")
