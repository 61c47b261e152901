"""benchmarks/silentbug_ppo_ab.py's bit-identity check: two copies of the same substrates package
log the same numbers, and a copy whose floating-point path differs only in last bits (one exp
done in float64) does not (so ``same_metrics: true`` in its results means something)."""

import shutil

import pytest

from verigap.silentbug.substrate import substrate_root

# the probability ratio's exp computed in float64 and rounded: the same maths, other last bits
RATIO_IN_FLOAT64 = {
    "ppo_single": (
        "ppo_single.py",
        "        ratio = logratio.exp()",
        "        ratio = logratio.double().exp().float()",
    ),
    "ppo_modular.train": (
        "ppo_modular/update.py",
        "ratio = log_ratio.exp()",
        "ratio = log_ratio.double().exp().float()",
    ),
}


@pytest.mark.parametrize("entry", list(RATIO_IN_FLOAT64))
def test_same_package_same_metrics_and_a_last_bit_change_is_seen(benchmark_script, tmp_path, entry):
    bench = benchmark_script("silentbug_ppo_ab")
    changed = tmp_path / "changed"
    shutil.copytree(
        substrate_root(), changed / "substrates", ignore=shutil.ignore_patterns("__pycache__")
    )
    rel, old, new = RATIO_IN_FLOAT64[entry]
    source = changed / "substrates" / rel
    text = source.read_text()
    assert text.count(old) == 1
    source.write_text(text.replace(old, new))
    runs = [
        bench._one_run(parent, entry, 5, 1024, tmp_path)
        for parent in (substrate_root().parent, substrate_root().parent, changed)
    ]
    assert any(m["kind"] == "iteration" for m in runs[0]["metrics"])
    assert runs[0]["metrics"] == runs[1]["metrics"]
    assert runs[0]["metrics"] != runs[2]["metrics"]
