"""The workplace family: a repository with its tickets, chat, pull requests and git history,
where the facts a task needs are spread across tools and some are out of date.

>>> items = build_items(seeds=[0], projects=["textkit"])
>>> env = WorkplaceEnv(items[1], Path("/tmp/wp")); prompt, info = env.reset()
>>> obs, reward, done, truncated, info = env.step({"name": "search_chat",
...                                                 "arguments": {"query": "slugify"}})

Code tasks are graded by tests (build, visible, hidden) and by the reviewer rubric
(``verigap.workplace.review``); probes by exact value. Verdicts list the facts consulted.
"""

from verigap.workplace._env import WorkplaceEnv, grade_code, grade_probe, read_tree
from verigap.workplace._items import KINDS, NEEDED, WorkItem, build_items, items_for
from verigap.workplace._tools import Consulted, workplace_tools
from verigap.workplace._world import PROJECTS, Workplace, build_workplace, project_tree

__all__ = [
    "KINDS",
    "NEEDED",
    "PROJECTS",
    "Consulted",
    "WorkItem",
    "Workplace",
    "WorkplaceEnv",
    "build_items",
    "build_workplace",
    "grade_code",
    "grade_probe",
    "items_for",
    "project_tree",
    "read_tree",
    "workplace_tools",
]
