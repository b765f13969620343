"""puffer_core.bench.plugin_overhead: the harness the plugins' benchmarks/overhead.py share."""

from __future__ import annotations

import gymnasium
from test_emulation import SelfWritingEnv

import puffer_core
from puffer_core.bench.plugin_overhead import RefuseZeroCopy, overhead_parser, report_repeats, time_against_raw
from puffer_core.emulation import GymnasiumEmulator


def test_refusing_the_binding_makes_the_emulator_copy():
    assert GymnasiumEmulator(SelfWritingEnv()).zero_copy
    assert not GymnasiumEmulator(RefuseZeroCopy(SelfWritingEnv())).zero_copy


def test_time_against_raw_times_both_loops_on_the_same_actions_and_closes_both(monkeypatch):
    raw, emulated = gymnasium.make("CartPole-v1"), puffer_core.make("classic/cartpole")
    raw.reset(seed=3)
    emulated.reset(seed=3)
    closed = []
    monkeypatch.setattr(raw, "close", lambda: closed.append("raw"))
    monkeypatch.setattr(emulated, "close", lambda: closed.append("emulated"))
    result = time_against_raw(raw, emulated, steps=400, rounds=2, seed=3)
    assert result["raw_sps"] > 0 and result["emulated_sps"] > 0 and result["ratio"] > 0
    assert sorted(closed) == ["emulated", "raw"]


def test_report_repeats_alternates_the_variants_seeds_each_repeat_and_prints_medians(capsys):
    calls = []

    def variant(name, ratios):
        def measure(seed):
            calls.append((name, seed))
            return {"raw_sps": 100.0, "emulated_sps": 90.0, "ratio": ratios[seed]}

        return measure

    medians = report_repeats({"a": variant("a", [1.0, 3.0, 2.0]), "b": variant("b", [5.0, 4.0, 6.0])}, 3, "env/x")
    assert calls == [("a", 0), ("b", 0), ("a", 1), ("b", 1), ("a", 2), ("b", 2)]
    assert medians == {"a": 2.0, "b": 5.0}
    out = capsys.readouterr().out
    assert "repeat 2 b: raw 100 SPS, emulated 90 SPS, ratio 6.000" in out
    assert "env/x (a) emulated/raw step time: median 2.000" in out


def test_the_parser_takes_the_shared_options():
    args = overhead_parser("x").parse_args(["--steps", "10", "--rounds", "2", "--repeats", "1", "--copying"])
    assert (args.steps, args.rounds, args.repeats, args.copying) == (10, 2, 1, True)
