"""The split planner's cost model and rules on hand-made profiles (no torch): the overlap
rule against the sum rule, pipelined and one-at-a-time servers, feasibility, dollars, the
explain table and saved profiles."""

from __future__ import annotations

import dataclasses
import json

import pytest

from tessera.errors import InvalidArgumentError
from tessera.frozen.planner import SplitProfile, choose, estimate

BASE = SplitProfile(names=("a", "b", "c", "d"), out_bytes=(4000, 1000, 500, 40),
                    input_bytes=3000, freeze=3, server_fwd_s=(0.01, 0.01, 0.01),
                    client_fwd_s=(0.01, 0.01, 0.01, 0.002), train_s=0.004, bandwidth=1e6,
                    rtt_s=0.001)


def test_overlap_beats_sum_where_the_sides_balance() -> None:
    plan = choose(BASE, batch=32, request=8, samples=3200)
    assert plan.rule == "auto"
    # the overlap rule balances server and client; the sum rule sees constant compute and
    # goes for the fewest bytes, deepest split
    assert plan.split == 2 and choose(BASE, 32, 8, "sum", samples=3200).split == 3
    auto = plan.candidate(2)
    assert auto.iteration_s == pytest.approx(max(auto.client_s, auto.server_s,
                                                 auto.network_s))


def test_one_request_at_a_time_keeps_the_papers_rule() -> None:
    p = dataclasses.replace(BASE, prefetch=0, concurrency=1)
    c = estimate(p, 2, batch=8, request=8, samples=800)
    assert c.iteration_s == pytest.approx(max(c.client_s, c.server_s + c.network_s))


@pytest.mark.parametrize("split", [0, 1, 2, 3])
def test_the_first_iteration_passes_every_stage_the_rest_the_slowest(split: int) -> None:
    # one iteration cannot overlap anything: its epoch holds every stage
    one = estimate(BASE, split, batch=32, request=8, samples=32)
    assert one.epoch_s > one.client_s + max(one.server_s, one.network_s) * 0.99
    # each further iteration adds the slowest stage's time, no more
    many = estimate(BASE, split, batch=32, request=8, samples=320)
    assert many.epoch_s - one.epoch_s == pytest.approx(9 * many.iteration_s)
    # one request at a time: the first iteration is the sum of the three
    seq = estimate(dataclasses.replace(BASE, prefetch=0, concurrency=1), split, 32, 32, 32)
    assert seq.epoch_s >= seq.sum_s


def test_a_cpu_server_counts_all_its_work_against_its_cores() -> None:
    p = dataclasses.replace(BASE, server_sample_s=0.005, server_cores=1)
    gpu = estimate(dataclasses.replace(p, server_cores=0), 3, 32, 8, 3200)
    cpu = estimate(p, 3, 32, 8, 3200)
    assert cpu.server_s == pytest.approx((32 * 0.03 + 32 * 0.005) / 4)
    assert gpu.server_s == pytest.approx(32 * 0.03 + 32 * 0.005 / 4)


def test_infeasible_splits_say_why() -> None:
    p = dataclasses.replace(BASE, max_output_bytes=2000, server_peak_bytes=(10, 10, 10**9),
                            server_memory_bytes=10**6, client_peak_bytes=(10**9, 1, 1, 1),
                            client_memory_bytes=10**9)
    plan = choose(p, 32, 8, samples=3200)
    assert [c.why for c in plan.candidates] == ["client memory", "output limit", "yes",
                                                "server memory"]
    assert plan.split == 2
    assert "client memory" in plan.explain()


def test_rules_and_bad_arguments() -> None:
    assert choose(BASE, 32, rule="freeze").split == 3
    assert choose(BASE, 32, rule="nosplit").split == 0
    assert choose(BASE, 32, rule="min").split == 3
    assert choose(BASE, 32, rule=1).split == 1
    with pytest.raises(InvalidArgumentError, match=r"split 4 is outside 0\.\.3"):
        choose(BASE, 32, rule=4)
    with pytest.raises(InvalidArgumentError, match="split must be one of"):
        choose(BASE, 32, rule="fastest")
    with pytest.raises(InvalidArgumentError, match="batch must be a positive integer"):
        choose(BASE, 0)
    with pytest.raises(InvalidArgumentError, match=r"freeze must be 1\.\.3"):
        dataclasses.replace(BASE, freeze=4)


def test_dollars_move_the_choice_when_phi_is_set() -> None:
    p = dataclasses.replace(BASE, dollars_per_byte=1e-3)
    fast = choose(p, 32, 8, samples=3200)
    cheap = choose(p, 32, 8, samples=3200, phi=1e6)
    assert cheap.candidate(cheap.split).dollars < fast.candidate(fast.split).dollars


def test_explain_and_saved_profiles() -> None:
    text = choose(BASE, 32, 8, samples=3200).explain("m  ")
    assert text.startswith("m  freeze 3 c") and "<- chosen" in text
    assert "NSG (sum rule) would pick 3" in text
    again = SplitProfile.from_json(json.loads(json.dumps(BASE.to_json())))
    assert again == BASE
    with pytest.raises(InvalidArgumentError, match="not a split profile"):
        SplitProfile.from_json({"names": []})


def test_calibration_reads_each_side_where_it_sets_the_pace() -> None:
    from tessera.frozen.planner import calibrate

    slow_link = dataclasses.replace(BASE, bandwidth=1e5)
    raw = estimate(slow_link, 0, 32, 8, 3200)
    # the client computed twice as long as modelled; NoSplit's iterations took longer than
    # its client and link explain: the rest is the read path's
    busy = [(0, 99.0)] + [(0, 2 * raw.client_s)] * 3
    slow = 1.5 * 2 * raw.client_s
    p = calibrate(slow_link, 32, 8, 3200, 0, [(0, slow)] * 3, busy)
    assert p.client_scale == pytest.approx(2.0)  # the first (warm-up) iteration is dropped
    c = estimate(p, 0, 32, 8, 3200)
    assert c.iteration_s == pytest.approx(slow) and p.read_scale > 1
    assert p.server_scale == 1.0  # nothing measured at F
    # a link-bound NoSplit no longer inflates the client (the old calibration divided the
    # iteration time by the client's model)
    fast = calibrate(slow_link, 32, 8, 3200, 0, [(0, slow)], [(0, raw.client_s)])
    assert fast.client_scale == pytest.approx(1.0)
    # the server's pace at F; calibrations are clamped to 0.1..10
    at_f = estimate(BASE, 3, 32, 8, 3200)
    p = calibrate(BASE, 32, 8, 3200, 0, [(3, 2 * at_f.iteration_s)], [])
    assert p.server_scale > 1 and estimate(p, 3, 32, 8, 3200).iteration_s == \
        pytest.approx(2 * at_f.iteration_s, rel=0.05)
    assert calibrate(BASE, 32, 8, 3200, 0, [], [(0, 1e6)]).client_scale == 10.0
    # two iterations at F: their mean, not the larger one
    two = calibrate(BASE, 32, 8, 3200, 0, [(3, 1.5 * at_f.iteration_s),
                                           (3, 2.5 * at_f.iteration_s)], [])
    assert estimate(two, 3, 32, 8, 3200).iteration_s == \
        pytest.approx(2 * at_f.iteration_s, rel=0.05)


def test_fetches_calibrate_what_short_epochs_and_hidden_reads_do_not_show() -> None:
    """a_r from NoSplit's fetches when its reads hide behind the client; a_s from the first
    batch's latency at F when no iteration at F ran with the pipeline full."""
    from tessera.frozen.planner import calibrate

    link = 32 * BASE.input_bytes / BASE.bandwidth + BASE.rtt_s
    raw = estimate(BASE, 0, 32, 8, 3200)
    assert raw.iteration_s == raw.client_s  # client-bound: the iterations hide the reads
    p = calibrate(BASE, 32, 8, 3200, 0, [(0, raw.client_s)] * 2, [],
                  [(0, 3 * link), (0, 2 * link), (0, 9 * link)])
    assert p.read_scale == pytest.approx(3.0)  # the median
    assert estimate(p, 0, 32, 8, 3200).network_s == pytest.approx(3 * link)
    # not from fetches at a split other than NoSplit's, nor when the client was profiled
    # at another split
    assert calibrate(BASE, 32, 8, 3200, 0, [], [], [(2, 3 * link)]).read_scale == 1.0
    assert calibrate(BASE, 32, 8, 3200, 1, [], [], [(0, 3 * link)]).read_scale == 1.0

    def first(q: SplitProfile, samples: int = 64) -> float:
        c = estimate(q, 3, 32, 8, samples)
        return c.epoch_s - (samples // 32 - 1) * c.iteration_s - c.client_s

    # two iterations (64 samples in batches of 32): none at F with the pipeline full
    slow = calibrate(BASE, 32, 8, 64, 0, [], [], [(3, 2 * first(BASE)), (0, link)])
    assert slow.server_scale > 1 and first(slow) == pytest.approx(2 * first(BASE), rel=1e-3)
    # a first batch faster than the model allows without the server: not the server's pace
    assert calibrate(BASE, 32, 8, 64, 0, [], [], [(3, 1e-6)]).server_scale == 1.0
    # a steady iteration at F sets a_s; the first batch's latency is then not used
    at_f = estimate(BASE, 3, 32, 8, 3200)
    steady = calibrate(BASE, 32, 8, 3200, 0, [(3, at_f.iteration_s)], [],
                       [(3, 100 * first(BASE))])
    assert steady.server_scale == pytest.approx(1.0, rel=0.05)


def test_the_clients_cost_of_answers_is_calibrated_at_f() -> None:
    """r_c: the client's compute at F beyond the model's, per answer, counts at every split
    that receives answers and not at NoSplit; none when the model explains F."""
    from tessera.frozen.planner import calibrate

    at_f = estimate(BASE, 3, 32, 8, 3200)  # 4 answers an iteration
    busy = [(0, estimate(BASE, 0, 32, 8, 3200).client_s)] * 3 + [(3, 9.0)] + \
        [(3, at_f.client_s + 0.04)] * 3
    p = calibrate(BASE, 32, 8, 3200, 0, [], busy)
    assert p.client_scale == pytest.approx(1.0)
    assert p.client_answer_s == pytest.approx(0.01)  # the first (warm-up) one dropped
    for split, extra in ((0, 0.0), (1, 0.04), (3, 0.04)):
        assert estimate(p, split, 32, 8, 3200).client_s == pytest.approx(
            estimate(BASE, split, 32, 8, 3200).client_s + extra)
    same = calibrate(BASE, 32, 8, 3200, 0, [], busy[:3] + [(3, at_f.client_s)] * 2)
    assert same.client_answer_s == 0.0
    assert SplitProfile.from_json(json.loads(json.dumps(p.to_json()))) == p


def test_list_prices_move_the_choice_to_the_split_that_moves_fewer_bytes() -> None:
    from tessera.storage.pricing import get_pricing

    # Split 1 is the fastest but sends 4x the bytes of split 2, the second fastest.
    p = dataclasses.replace(BASE, out_bytes=(4000, 1000, 250, 40),
                            server_fwd_s=(0.001, 0.02, 0.08),
                            client_fwd_s=(0.001, 0.001, 0.001, 0.001), bandwidth=1e8)
    priced = p.with_prices(get_pricing("s3"))
    fast = choose(priced, 32, 8, samples=3200)
    by_time = sorted((c for c in fast.candidates if c.feasible and c.split),
                     key=lambda c: c.epoch_s)
    first, second = by_time[0], by_time[1]
    assert (first.split, second.split) == (1, 2) and first.out_bytes == 4 * second.out_bytes
    assert fast.split == 1 and second.dollars < first.dollars
    cheap = choose(priced, 32, 8, samples=3200, phi=1e9)
    assert cheap.split != 1 and cheap.candidate(cheap.split).dollars == min(
        c.dollars for c in cheap.candidates if c.feasible)  # dollars rule the choice
    two = dataclasses.replace(priced, freeze=2, server_fwd_s=priced.server_fwd_s[:2])
    assert choose(two, 32, 8, samples=3200).split == 1
    assert choose(two, 32, 8, samples=3200, phi=1e9).split == 2  # the second fastest
    assert choose(p, 32, 8, samples=3200, phi=1e9).split == 1  # unpriced: $ are all 0
    text = choose(priced, 32, 8, samples=3200, phi=5.0).explain()
    assert "phi 5 s/$" in text and "$/epoch" in text and "no prices" not in text
    assert "no prices" in choose(p, 32, 8, samples=3200).explain()


def test_materialising_pays_from_the_break_even_on() -> None:
    """Features at F read back cost less per epoch than recomputing: materialising pays from
    the break-even on (and not one epoch before); the cost of each side is in the rule."""
    plan = choose(BASE, 32, 8, samples=3200)
    rule = plan.materialise()
    assert rule.split == 3 and rule.feasible
    assert rule.read_s < rule.recompute_s and rule.write_s > 0
    even = rule.break_even
    # the spec's inequality, both sides: (E - 1) x recompute > write + (E - 1) x read
    assert abs((even - 1) * rule.recompute_s - (rule.write_s + (even - 1) * rule.read_s)) \
        < 1e-9
    assert rule.pays(int(even) + 1) and not rule.pays(int(even) - 1 if even > 1 else 0)
    assert f"pays from {int(-(-even // 1))} epochs on" in plan.explain()


def test_materialising_never_pays_when_reading_features_back_is_slower() -> None:
    """Large features at F over a slow link take longer to read back than recomputing at the
    chosen (earlier) split."""
    slow = dataclasses.replace(BASE, out_bytes=(4000, 1000, 500_000, 40), bandwidth=1e5)
    rule = choose(slow, 32, 8, samples=3200).materialise()
    assert rule.break_even == float("inf") and not rule.pays(10**6)
    assert "never pays" in choose(slow, 32, 8, samples=3200).explain()


def test_storage_and_dollars_move_the_break_even() -> None:
    """With phi > 0 the dollars of storing the features (a price given: the tables have
    none) push the break-even later; an infeasible F cannot be materialised."""
    p = dataclasses.replace(BASE, dollars_per_byte=1e-6)
    plan = choose(p, 32, 8, samples=3200, phi=100.0)
    free = plan.materialise()
    priced = plan.materialise(months=12, storage_usd_per_gb_month=1000.0)
    assert priced.storage_usd > 0 and priced.break_even > free.break_even
    blocked = dataclasses.replace(BASE, server_peak_bytes=(10, 10, 10**9),
                                  server_memory_bytes=10**6)
    rule = choose(blocked, 32, 8, samples=3200).materialise()
    assert not rule.feasible and "not possible" in rule.line()
