"""benchmarks/silentbug_ppo_profile.py finds every section it times in the current
``ppo_single.py`` (it matches statements by their text, so an edit to the substrate must not
silently drop a section), and both of its variants still compile."""

import pytest

from verigap.silentbug.substrate import substrate_root


def test_every_section_is_found_once_and_both_variants_compile(benchmark_script):
    bench = benchmark_script("silentbug_ppo_profile")
    source = (substrate_root() / "ppo_single.py").read_text()
    for numpy_forward in (False, True):
        text = bench.instrument(source, numpy_forward)
        compile(text, "ppo_single.py", "exec")
        for _, label in bench.SECTIONS:
            assert text.count(f"_tick({label!r})") == 1, label
        assert ("np_forward(actor_w" in text) is numpy_forward
        assert ("agent.actor(x)" in text) is not numpy_forward


def test_a_missing_section_is_an_error_not_a_silent_gap(benchmark_script):
    bench = benchmark_script("silentbug_ppo_profile")
    source = (
        (substrate_root() / "ppo_single.py")
        .read_text()
        .replace("loss.backward()", "loss.backward( )")
    )
    with pytest.raises(SystemExit, match=r"loss\.backward\(\)"):
        bench.instrument(source, False)
