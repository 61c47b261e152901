"""The workplace as agent tools: chat, tickets, pull requests and git history.

Every tool shows records with their timestamps and authors, so an agent can order what it
read; each call's surfaced fact ids go to a :class:`Consulted` log, which the verdict reports
(which facts the agent saw, and through which call). Bad arguments are ``ToolError``s: the
episode loop turns them into error observations and the episode goes on.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from pydantic import Field

from verigap.agents import Tool, ToolArgs, ToolError
from verigap.workplace._world import Entry, Workplace

MAX_HITS = 20


@dataclass
class Consulted:
    """Which tool calls surfaced which facts: ``calls[i] = (tool, fact ids)``."""

    calls: list[tuple[str, tuple[str, ...]]] = field(default_factory=list)

    def add(self, tool: str, facts: list[str]) -> None:
        self.calls.append((tool, tuple(dict.fromkeys(facts))))

    def facts(self) -> dict[str, list[int]]:
        """fact id -> the indices of the calls that surfaced it."""
        out: dict[str, list[int]] = {}
        for i, (_, fs) in enumerate(self.calls):
            for f in fs:
                out.setdefault(f, []).append(i)
        return out


def _entry(e: Entry) -> str:
    return f"[{e.at}] {e.author}: {e.text}"


class SearchChatArgs(ToolArgs):
    query: str = Field(min_length=2, description="text to look for (case-insensitive)")
    channel: str | None = Field(None, description="only this channel, e.g. 'dev'")


class ThreadArgs(ToolArgs):
    thread_id: str


class ListTicketsArgs(ToolArgs):
    status: str | None = Field(None, description="e.g. 'Open', 'In Progress', 'Done'")


class TicketArgs(ToolArgs):
    ticket_id: str = Field(description="e.g. 'WP-101'")


class SearchTicketsArgs(ToolArgs):
    query: str = Field(min_length=2)


class PrArgs(ToolArgs):
    number: int = Field(ge=1)


class ListPrsArgs(ToolArgs):
    pass


class GitLogArgs(ToolArgs):
    path: str | None = Field(None, description="only commits that touched this file")
    limit: int = Field(20, ge=1, le=100)


class GitShowArgs(ToolArgs):
    sha: str = Field(min_length=4, description="a commit id or a unique prefix of one")


def workplace_tools(w: Workplace, log: Consulted) -> list[Tool]:
    """The eight workplace tools (plus ``list_prs``) over ``w``, logging surfaced facts."""
    tickets = {t.id: t for t in w.tickets}
    threads = {t.id: t for t in w.threads}
    prs = {p.number: p for p in w.prs}
    channels = sorted({t.channel for t in w.threads})

    def search_chat(a: SearchChatArgs) -> str:
        if a.channel is not None and a.channel.lstrip("#") not in channels:
            raise ToolError(f"no channel {a.channel!r}; channels: {', '.join(channels)}")
        q = a.query.lower()
        hits, facts = [], []
        for t in w.threads:
            if a.channel is not None and t.channel != a.channel.lstrip("#"):
                continue
            for e in t.messages:
                if q in e.text.lower():
                    hits.append(f"{t.id} #{t.channel} {_entry(e)}")
                    facts += e.facts
        log.add("search_chat", facts)
        if not hits:
            return f"no messages match {a.query!r}"
        more = f"\n({len(hits) - MAX_HITS} more not shown)" if len(hits) > MAX_HITS else ""
        return "\n".join(hits[:MAX_HITS]) + more

    def read_thread(a: ThreadArgs) -> str:
        t = threads.get(a.thread_id)
        if t is None:
            raise ToolError(f"no thread {a.thread_id!r}; search_chat shows thread ids")
        log.add("read_thread", [f for e in t.messages for f in e.facts])
        return f"#{t.channel} · {t.topic}\n" + "\n".join(_entry(e) for e in t.messages)

    def list_tickets(a: ListTicketsArgs) -> str:
        rows = [t for t in w.tickets if a.status is None or t.status.lower() == a.status.lower()]
        log.add("list_tickets", [])
        return "\n".join(f"{t.id} [{t.status}] {t.title}" for t in rows) or "no tickets"

    def read_ticket(a: TicketArgs) -> str:
        t = tickets.get(a.ticket_id.strip().upper())
        if t is None:
            raise ToolError(f"no ticket {a.ticket_id!r}; list_tickets shows the ids")
        log.add("read_ticket", [*t.facts, *(f for c in t.comments for f in c.facts)])
        lines = [
            f"{t.id} [{t.status}] {t.title}",
            f"opened by {t.author} at {t.created}",
            "",
            t.description,
            "",
        ]
        lines += [
            f"status {frm} -> {to} by {who} at {when}" for when, who, frm, to in t.status_changes
        ]
        lines += ["comments:"] + [_entry(c) for c in t.comments] if t.comments else []
        return "\n".join(lines)

    def search_tickets(a: SearchTicketsArgs) -> str:
        q = a.query.lower()
        rows = [
            t
            for t in w.tickets
            if q in " ".join([t.title, t.description, *(c.text for c in t.comments)]).lower()
        ]
        log.add("search_tickets", [])
        return "\n".join(f"{t.id} [{t.status}] {t.title}" for t in rows) or (
            f"no tickets match {a.query!r}"
        )

    def list_prs(a: ListPrsArgs) -> str:
        log.add("list_prs", [])
        return "\n".join(f"#{p.number} [{p.state}] {p.title} ({p.author})" for p in w.prs)

    def read_pr(a: PrArgs) -> str:
        p = prs.get(a.number)
        if p is None:
            raise ToolError(f"no pull request #{a.number}; list_prs shows the numbers")
        log.add("read_pr", [*p.facts, *(f for c in p.comments for f in c.facts)])
        return "\n".join(
            [
                f"#{p.number} [{p.state}] {p.title}",
                f"opened by {p.author} at {p.created}",
                "",
                p.body,
                "",
                "comments:",
                *(_entry(c) for c in p.comments),
            ]
        )

    def git_log(a: GitLogArgs) -> str:
        rows = [c for c in w.commits if a.path is None or a.path in c.files]
        log.add("git_log", [])
        if not rows:
            raise ToolError(f"no commits touch {a.path!r}; call git_log without a path")
        return "\n".join(f"{c.sha[:10]} {c.at} {c.author}: {c.subject}" for c in rows[: a.limit])

    def git_show(a: GitShowArgs) -> str:
        found = [c for c in w.commits if c.sha.startswith(a.sha.strip().lower())]
        if len(found) != 1:
            raise ToolError(
                f"{'no' if not found else 'more than one'} commit matches "
                f"{a.sha!r}; git_log shows the ids"
            )
        c = found[0]
        log.add("git_show", [])
        return "\n".join(
            [
                f"commit {c.sha}",
                f"Author: {c.author}",
                f"Date: {c.at}",
                "",
                c.subject,
                "",
                c.body,
                "",
                "files: " + ", ".join(c.files),
                "",
                c.patch,
            ]
        ).strip()

    return [
        Tool(
            "search_chat",
            "Search chat messages (all channels, or one).",
            SearchChatArgs,
            search_chat,
        ),
        Tool("read_thread", "Read a whole chat thread by id.", ThreadArgs, read_thread),
        Tool("list_tickets", "List tickets (id, status, title).", ListTicketsArgs, list_tickets),
        Tool(
            "read_ticket",
            "Read a ticket with its comments and status changes.",
            TicketArgs,
            read_ticket,
        ),
        Tool(
            "search_tickets",
            "Find tickets whose text mentions a query.",
            SearchTicketsArgs,
            search_tickets,
        ),
        Tool("list_prs", "List pull requests.", ListPrsArgs, list_prs),
        Tool("read_pr", "Read a pull request's description and discussion.", PrArgs, read_pr),
        Tool(
            "git_log",
            "The repository's commits, newest first (optionally for one file).",
            GitLogArgs,
            git_log,
        ),
        Tool("git_show", "One commit: message, files and patch.", GitShowArgs, git_show),
    ]
