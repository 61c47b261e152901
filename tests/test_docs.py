"""Numbers in README.md and docs/ agree with results/, and the marker machinery can tell."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from verigap.cli import app
from verigap.errors import ConfigError
from verigap.report.docs import NO_HAND_NUMBERS, bare_numbers, doc_files, regenerate, sync
from verigap.results import write_result

ROOT = Path(__file__).resolve().parents[1]


def test_readme_and_docs_agree_with_the_committed_results() -> None:
    files = doc_files(ROOT)
    assert ROOT / "README.md" in files and ROOT / "docs" / "results.md" in files
    stale = sync(files, ROOT, write=False)
    assert stale == [], f"{[str(f) for f in stale]} disagree with results/: run `verigap docs`"


def test_the_readme_shows_the_pilot_table_from_its_results_file() -> None:
    text = (ROOT / "README.md").read_text()
    assert "<!-- results results/patchworld/pilot.json view:pilot -->" in text
    assert "<!-- results results/patchworld/careless.json value:" in text


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    write_result(
        tmp_path / "results" / "x.json",
        {
            "visible_pass": 0.586,
            "true_success": 0.3075,
            "false_success": 0.2785,
            "mean_reward": 0.586,
            "outcomes": {
                "tested": {"fixed": 0.5, "delete": 0.5},
                "untested": {"fixed": 0.25, "delete": 0.75},
            },
        },
        command="make x",
    )
    return tmp_path


INLINE = "correct on <!-- results results/x.json value:true_success fmt:.1% -->{}<!-- /results -->"


def test_an_inline_value_is_filled_from_the_file(repo: Path) -> None:
    assert regenerate(INLINE.format("99%"), repo) == INLINE.format("30.8%")
    assert regenerate(INLINE.format("30.8%"), repo) == INLINE.format("30.8%")


def test_a_hand_edited_number_is_caught_and_fixed(repo: Path) -> None:
    doc = repo / "README.md"
    doc.write_text("# t\n\n" + INLINE.format("30.8%") + "\n")
    assert sync([doc], repo, write=False) == []
    doc.write_text(doc.read_text().replace("30.8%", "31.0%"))
    runner = CliRunner()
    result = runner.invoke(app, ["docs", "--check", "--root", str(repo)])
    assert result.exit_code == 1 and "README.md" in result.output
    assert "31.0%" in doc.read_text()  # --check changes nothing
    assert runner.invoke(app, ["docs", "--root", str(repo)]).exit_code == 0
    assert "30.8%" in doc.read_text()
    assert runner.invoke(app, ["docs", "--check", "--root", str(repo)]).exit_code == 0


def test_a_block_view_draws_a_table_and_fenced_examples_are_left_alone(repo: Path) -> None:
    block = "<!-- results results/x.json view:rollout -->\nold\n<!-- /results -->"
    text = f"{block}\n\n```markdown\n{block}\n```\n"
    out = regenerate(text, repo)
    table, fenced = out.split("```markdown")
    assert "| true success | 0.307 |" in table and "old" not in table
    assert "| untested | 0.250 | 0.750 |" in table
    assert fenced == f"\n{block}\n```\n"


def test_a_one_line_view_is_drawn_inline_and_a_table_is_refused_there(repo: Path) -> None:
    from verigap.report.views import view

    @view("test_docs_share_line")
    def share_line(data: dict) -> str:
        return f"{data['true_success']:.0%} correct"

    inline = (
        "| cell | <!-- results results/x.json view:test_docs_share_line -->?<!-- /results --> |"
    )
    assert regenerate(inline, repo) == inline.replace("?", "31% correct")
    table = "<!-- results results/x.json view:rollout -->?<!-- /results -->"
    with pytest.raises(ConfigError, match="draws several lines"):
        regenerate(table, repo, "doc.md")


@pytest.mark.parametrize(
    "args, message",
    [
        ("results/missing.json view:rollout", "no such results file"),
        ("results/x.json view:nope", "unknown view 'nope'"),
        ("results/x.json value:outcomes.tested.stub", "no value at 'outcomes.tested.stub'"),
        ("results/x.json view:rollout value:true_success", "exactly one of"),
        ("results/x.json colour:red", "is not view:NAME"),
    ],
)
def test_bad_markers_name_the_file_line_and_problem(repo: Path, args: str, message: str) -> None:
    text = f"# t\n\n<!-- results {args} -->x<!-- /results -->\n"
    with pytest.raises(ConfigError, match=message) as e:
        regenerate(text, repo, "doc.md")
    assert str(e.value).startswith("doc.md:3: ")


def test_every_doc_is_held_to_the_no_typed_numbers_rule() -> None:
    """A new page under docs/ joins the rule by being listed; forgetting to list it fails."""
    docs = {"README.md", *(f"docs/{p.name}" for p in (ROOT / "docs").glob("*.md"))}
    assert docs <= set(NO_HAND_NUMBERS), (
        f"add {sorted(docs - set(NO_HAND_NUMBERS))} to NO_HAND_NUMBERS"
    )


@pytest.mark.parametrize("doc", NO_HAND_NUMBERS)
def test_no_figure_is_typed_by_hand(doc: str) -> None:
    found = bare_numbers((ROOT / doc).read_text())
    assert found == [], (
        f"{doc} types these numbers by hand (line, number): {found[:12]}; "
        "draw them from results/ with a marker (docs/results.md)"
    )


@pytest.mark.parametrize(
    "text, bare",
    [
        ("false success 0.187 at k=2", ["0.187", "2"]),
        ("four sessions served 3.6x the episodes", ["3.6"]),
        ("a penalty of −3 cut it by 15 points", ["−3", "15"]),
        ("| 1 | 8 | 189.7 |", ["1", "8", "189.7"]),
        ("measured 2,000 programs", ["2,000"]),
        ("a drop of -3 and a gain of 4-5 points", ["-3", "4", "5"]),
    ],
)
def test_a_typed_number_is_found(text: str, bare: list[str]) -> None:
    assert [n for _, n in bare_numbers(text)] == bare


@pytest.mark.parametrize(
    "text",
    [
        "E06, T14 and M04 name predictions; v2 grades; p50 is a percentile",
        "measured <!-- results results/x.json value:true_success fmt:.1% -->30.8%<!-- /results -->",
        'the setting `audit_10_k2` with `k=2` and `{"n": 8}`',
        "## 3. Add a view\n\n1. first step",
        'Seed 000 says "5% barely helps" (quoted as the write-up\'s)',
        "a control task (Hewitt & Liang, 2019)",
        "```bash\nverigap pilot --steps 1000\n```",
        "[a link](docs/x2.md)",
        "an AVX-512 machine, not x86-64, as in SWE-bench #465",
    ],
)
def test_names_code_markers_and_quotes_are_not_typed_numbers(text: str) -> None:
    assert bare_numbers(text) == []
