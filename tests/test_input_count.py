"""One input-token figure per call and the drift of our count, as ``runs show`` and the
viewer print them."""

from __future__ import annotations

from personae.telemetry.inputcount import input_count
from personae.ui._html import call_tokens


def test_the_figure_is_the_providers_and_the_drift_is_ours_against_it() -> None:
    usage = {"input_tokens": 1000, "output_tokens": 7, "counted_input_tokens": 1054,
             "counter": "estimate:generic", "counter_exact": False}  # fmt: skip
    count = input_count(usage)
    assert count.figure == 1000 and count.drift is not None and round(count.drift, 1) == 5.4
    assert count.text() == "1,000 (provider; ours +5.4%, estimate:generic)"
    assert call_tokens(usage) == "1,000 in (ours +5.4%) / 7 out"
    exact = {**usage, "counted_input_tokens": 980, "counter": "o200k_base", "counter_exact": True}
    assert input_count(exact).text() == "1,000 (provider; ours -2.0%, o200k_base exact)"


def test_no_report_means_ours_alone_never_a_drift_of_zero() -> None:
    # a stream that ended without usage: the stored input_tokens are our own count
    streamed = {"input_tokens": 812, "output_tokens": 9, "counted_input_tokens": 812,
                "counter": "estimate:local", "reported": False}  # fmt: skip
    count = input_count(streamed)
    assert count.reported is None and count.drift is None and count.figure == 812
    assert count.text() == "812 (ours, estimate:local; the provider reported none)"
    assert call_tokens(streamed) == "812 in (ours; none reported) / 9 out"
    zero = input_count({"input_tokens": 0, "counted_input_tokens": 40, "counter": "x"})
    assert zero.reported is None and zero.figure == 40
    old = input_count({"input_tokens": 50, "output_tokens": 1})  # stored before we counted
    assert old.text() == "50 (provider; ours not recorded)" and old.drift is None
    assert call_tokens({}) == "- in"
