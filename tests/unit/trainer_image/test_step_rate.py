"""The chief's steps/s: a window over progress samples, not the gap between two of them."""

from __future__ import annotations

import pytest

from tfps_trainer.step_rate import StepRate


def test_a_burst_of_steps_reported_together_does_not_read_as_thousands_per_second():
    r = StepRate(window=10.0, min_span=1.0)
    r.reset(0.0, 0)
    for t in range(1, 9):  # 60 steps/s, sampled every second
        r.add(float(t), 60 * t)
    # the 20 steps scheduled ahead finish together, 4 ms after the last sample (a checkpoint's join)
    assert r.add(8.004, 500) == pytest.approx(500 / 8.004)
    assert r.add(9.0, 540) == pytest.approx(540 / 9.0)


def test_the_window_slides_so_the_rate_follows_a_slow_down():
    r = StepRate(window=5.0, min_span=1.0)
    r.reset(0.0, 0)
    for t in range(1, 11):
        r.add(float(t), 100 * t)  # 100 steps/s for 10 s
    for t in range(11, 21):
        rate = r.add(float(t), 1000 + 10 * (t - 10))  # then 10 steps/s
    assert rate == pytest.approx(10.0, rel=0.25)


def test_no_rate_until_the_samples_span_min_span_and_none_again_after_a_resume():
    r = StepRate(window=10.0, min_span=1.0)
    r.reset(0.0, 0)
    assert r.add(0.2, 10) is None
    assert r.add(1.2, 70) == pytest.approx(70 / 1.2)
    r.reset(5.0, 500)  # resumed from a checkpoint: steps before 500 were not run here
    assert r.add(5.5, 530) is None
    assert r.add(6.5, 590) == pytest.approx(60.0)


def test_a_step_not_beyond_the_last_keeps_the_rate():
    r = StepRate(min_span=0.5)
    r.reset(0.0, 0)
    assert r.add(1.0, 50) == pytest.approx(50.0)
    assert r.add(2.0, 50) == pytest.approx(50.0)
