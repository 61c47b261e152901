"""The migrations item on hand-built projects: a schema change (Django model, SQLAlchemy model,
SQL file, SQL in a Python string) needs a migration where the project keeps them; the careful
change passes the whole rubric, the same change without its migration fails that item only,
and a project without migrations is not asked for one."""

from __future__ import annotations

import pytest

from verigap.workplace.review import Scope, is_migration, review, schema_of

ITEM = "migration_with_schema_change"

DJANGO = """from django.db import models


class Post(models.Model):
    title = models.CharField(max_length=100)

    def __str__(self):
        return self.title
"""
DJANGO_NEW = DJANGO.replace(
    "    title = models.CharField(max_length=100)\n",
    '    title = models.CharField(max_length=100)\n    body = models.TextField(default="")\n',
)
DJANGO_MIGRATION = (
    "from django.db import migrations, models\n\n\nclass Migration(migrations.Migration):\n"
    '    dependencies = [("blog", "0001_initial")]\n'
    '    operations = [migrations.AddField("post", "body", models.TextField(default=""))]\n'
)
TEST = "def test_title():\n    assert True\n"
TEST_NEW = TEST + "\n\ndef test_body():\n    assert True\n"

ALCHEMY = """from sqlalchemy import Column, Integer, String
from sqlalchemy.orm import declarative_base

Base = declarative_base()


class User(Base):
    __tablename__ = "users"
    id = Column(Integer, primary_key=True)
    name = Column(String(50))
"""
ALCHEMY_NEW = ALCHEMY.replace(
    "    name = Column(String(50))\n", "    name = Column(String(50))\n    email = Column(String)\n"
)

SQL = "CREATE TABLE posts (\n  id INTEGER PRIMARY KEY,\n  title TEXT NOT NULL\n);\n"
SQL_NEW = SQL.replace("title TEXT NOT NULL", "title TEXT NOT NULL,\n  votes INTEGER DEFAULT 0")


def failed(before: dict[str, str], after: dict[str, str], scope: Scope) -> dict[str, str]:
    return {r.item: r.reason for r in review(before, {**before, **after}, scope) if not r.passed}


def reason(before: dict[str, str], after: dict[str, str], scope: Scope) -> str:
    (r,) = [r for r in review(before, {**before, **after}, scope) if r.item == ITEM]
    return ("pass: " if r.passed else "fail: ") + r.reason


DJANGO_PROJECT = {
    "blog/models.py": DJANGO,
    "blog/migrations/__init__.py": "",
    "blog/migrations/0001_initial.py": "# the first migration\n",
    "blog/tests/test_models.py": TEST,
}
DJANGO_SCOPE = Scope(("blog/models.py::Post",), ("blog",))
DJANGO_CAREFUL = {
    "blog/models.py": DJANGO_NEW,
    "blog/migrations/0002_post_body.py": DJANGO_MIGRATION,
    "blog/tests/test_models.py": TEST_NEW,
}


def test_a_careful_django_change_with_its_migration_passes_the_whole_rubric():
    assert failed(DJANGO_PROJECT, DJANGO_CAREFUL, DJANGO_SCOPE) == {}
    assert "blog/migrations/0002_post_body.py" in reason(
        DJANGO_PROJECT, DJANGO_CAREFUL, DJANGO_SCOPE
    )


def test_the_same_change_without_its_migration_fails_that_item_only():
    sloppy = {k: v for k, v in DJANGO_CAREFUL.items() if "migrations" not in k}
    out = failed(DJANGO_PROJECT, sloppy, DJANGO_SCOPE)
    assert set(out) == {ITEM}
    assert "Post.body" in out[ITEM] and "blog/migrations" in out[ITEM]


def test_a_project_without_migrations_is_not_asked_for_one():
    project = {k: v for k, v in DJANGO_PROJECT.items() if "migrations" not in k}
    sloppy = {k: v for k, v in DJANGO_CAREFUL.items() if "migrations" not in k}
    assert failed(project, sloppy, DJANGO_SCOPE) == {}
    assert reason(project, sloppy, DJANGO_SCOPE).startswith("pass: n/a: the project keeps no")


def test_a_change_that_leaves_the_schema_alone_needs_no_migration():
    method = DJANGO.replace("return self.title", "return self.title.strip()")
    after = {"blog/models.py": method, "blog/tests/test_models.py": TEST_NEW}
    assert failed(DJANGO_PROJECT, after, DJANGO_SCOPE) == {}
    assert reason(DJANGO_PROJECT, after, DJANGO_SCOPE) == "pass: n/a: no model or schema change"


@pytest.mark.parametrize(
    "project, change, migration",
    [
        (  # SQLAlchemy declarative model, Alembic (Flask-Migrate's layout)
            {
                "app/models.py": ALCHEMY,
                "migrations/env.py": "",
                "migrations/versions/a1_init.py": "",
            },
            {"app/models.py": ALCHEMY_NEW},
            {"migrations/versions/b2_user_email.py": "def upgrade():\n    pass\n"},
        ),
        (  # a schema file with numbered SQL migrations
            {"db/schema.sql": SQL, "db/migrations/001_init.sql": SQL},
            {"db/schema.sql": SQL_NEW},
            {"db/migrations/002_votes.sql": "ALTER TABLE posts ADD COLUMN votes INTEGER;\n"},
        ),
        (  # SQL in a Python string (sqlite without an ORM)
            {"app/db.py": f'SCHEMA = """{SQL}"""\n', "app/migrations/001_init.sql": SQL},
            {"app/db.py": f'SCHEMA = """{SQL_NEW}"""\n'},
            {"app/migrations/002_votes.sql": "ALTER TABLE posts ADD COLUMN votes INTEGER;\n"},
        ),
    ],
    ids=["sqlalchemy-alembic", "sql-file", "sql-in-python"],
)
def test_each_schema_style_needs_its_migration(project, change, migration):
    scope = Scope((), ("app", "db"))
    assert reason(project, change, scope).startswith("fail: the schema changed in")
    assert reason(project, {**change, **migration}, scope).startswith("pass: migration")


def test_what_counts_as_a_migration_and_as_schema():
    assert is_migration("blog/migrations/0002_post_body.py")
    assert is_migration("migrations/versions/b2_user_email.py")
    assert is_migration("db/migrations/002_votes.sql")
    assert not is_migration("blog/migrations/__init__.py")
    assert not is_migration("migrations/env.py")
    assert not is_migration("blog/models.py")
    assert schema_of("m.py", "class Helper:\n    x = 1\n") == {}  # not a model
    assert "model:User.email" in schema_of("m.py", ALCHEMY_NEW)
    assert schema_of("m.py", "class (:\n") is None
