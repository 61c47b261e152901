"""Static reports built only from results files (no number typed by hand)."""

from verigap.report.pilot import build_report, load_runs, summary_table

__all__ = ["build_report", "load_runs", "summary_table"]
