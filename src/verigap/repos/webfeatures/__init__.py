"""Feature tasks from a real web application's history (database, HTTP routes, pages).

The application is a small Flask to-do list (SQLAlchemy models with Alembic migrations, form
and HTTP routes, Jinja templates) kept as a git bundle under ``data/``. Commits that add
behaviour with tests become tasks: the base is the parent, the tests are hidden, the prompt is a
product-owner ticket, and features a user sees in a page carry a hidden check that drives
headless Chromium at the app served on loopback inside the sandbox.

    python -m verigap.repos.webfeatures build     # validate every candidate, write the tasks
"""

from verigap.repos.webfeatures.build import (
    candidates,
    grade,
    hidden_outcomes,
    open_bundle,
    verdict_from,
)
from verigap.repos.webfeatures.task import FeatureTask

__all__ = ["FeatureTask", "candidates", "grade", "hidden_outcomes", "open_bundle", "verdict_from"]
