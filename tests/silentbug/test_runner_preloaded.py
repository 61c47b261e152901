"""Runs forked from the runner's preloaded interpreter match fresh ``python -I`` runs exactly,
and crashes and timeouts are reported as before."""

from verigap.runs import read_jsonl
from verigap.silentbug.runner import run_workspace
from verigap.silentbug.substrate import SUBSTRATES, pristine_files, workspace_files

CONFIG = {"seed": 4, "env_id": "CartPole-v1", "total_timesteps": 1024}


def _without_timing(run_dir):
    return [
        {k: v for k, v in r.items() if k != "sps"} for r in read_jsonl(run_dir / "metrics.jsonl")
    ]


def test_a_preloaded_run_gives_the_numbers_of_a_fresh_interpreter(tmp_path):
    files = workspace_files("cartpole_modular", pristine_files())
    entry = SUBSTRATES["cartpole_modular"].entry
    results = {}
    for preloaded in (True, False):
        run_dir = tmp_path / f"preloaded-{preloaded}"
        results[preloaded] = run_workspace(
            run_dir, files=files, entry=entry, config=CONFIG, preloaded=preloaded
        )
        assert results[preloaded]["status"] == "ok", (run_dir / "train.log").read_text()
        assert results[preloaded]["iterations"] == 2 and results[preloaded]["cpu_s"] > 0
    assert _without_timing(tmp_path / "preloaded-True") == _without_timing(
        tmp_path / "preloaded-False"
    )
    assert results[True]["score"] == results[False]["score"]


FAKE = {  # a tiny workspace package: entries that fail in the ways a broken patch can
    "__init__.py": "",
    "boom.py": "def main(argv):\n    print('about to fail')\n    raise ValueError('boom')\n",
    "refuse.py": "def main(argv):\n    raise SystemExit('config: unknown fields [x]')\n",
    "spin.py": "def main(argv):\n    while True:\n        pass\n",
    "fine.py": "def main(argv):\n    print('trained', argv[-1])\n",
}


def test_crashes_timeouts_and_output_are_reported_and_the_interpreter_lives_on(tmp_path):
    def run(entry, **kw):
        res = run_workspace(
            tmp_path / entry,
            files=FAKE,
            entry=entry,
            config={"seed": 1, "total_timesteps": 10},
            **kw,
        )
        return res, (tmp_path / entry / "train.log").read_text()

    res, log = run("boom")
    assert (res["status"], res["returncode"]) == ("crashed", 1)
    assert "about to fail" in log and "ValueError: boom" in log
    res, log = run("refuse")
    assert (res["status"], res["returncode"]) == ("crashed", 1)
    assert "config: unknown fields [x]" in log
    res, log = run("spin", timeout_s=0.5)
    assert (res["status"], res["returncode"]) == ("timeout", None)
    assert log.startswith("timed out after 0.5 s")
    res, log = run("fine")
    assert (res["status"], res["returncode"]) == ("ok", 0)
    assert log.strip() == f"trained {tmp_path / 'fine'}"
