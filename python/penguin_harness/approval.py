"""Approval policies: the four modes of the harness and small composable rules.

Pass any of these (or a plain callable) as ``approve=`` to ``Session.run``. Policies are data
evaluated by the Rust core; only the ``ask`` callables you supply run Python code, on the event
loop that iterates the run. A callable receives the ``tool_call`` message dict and returns
``"allow"``, ``"deny"``, ``"forbidden"``, ``True`` or ``False`` (sync or ``async def``); one that
raises or returns anything else denies, and the trace's ``approval_decision`` says why.

Rules abstain when they do not match; ``first_match`` returns the first verdict of its rules,
and a policy that abstains as a whole denies. Patterns use the Rust ``regex`` syntax (like
Python's ``re`` without look-around or back-references).
"""

from __future__ import annotations

from typing import Union

from penguin_harness._core import Policy
from penguin_harness.types import ApproveFn

__all__ = [
    "Policy",
    "allow_all",
    "allow_commands",
    "allow_tools",
    "always_ask",
    "ask",
    "deny_all",
    "deny_commands",
    "deny_tools",
    "first_match",
    "forbid_commands",
    "mode",
    "read_only",
    "when_argument",
    "when_permission",
    "when_tools",
]

PolicyLike = Union[Policy, ApproveFn]

allow_all: Policy = Policy.decide("allow")
"""Allow every call."""

deny_all: Policy = Policy.decide("deny")
"""Deny every call (the same as passing no ``approve`` at all)."""


def read_only(ask: ApproveFn) -> Policy:
    """Allow tools with permission ``"r"``; ``ask`` decides the rest, unknown tools included."""
    return Policy.mode("read-only", ask)


def always_ask(ask: ApproveFn) -> Policy:
    """``ask`` decides every call."""
    return Policy.mode("always-ask", ask)


def mode(name: str, ask: ApproveFn | None = None) -> Policy:
    """A mode by its CLI name: ``allow-all``, ``deny-all``, ``read-only`` or ``always-ask``."""
    return Policy.mode(name, ask)


def ask(fn: ApproveFn) -> Policy:
    """A rule that always defers to ``fn``."""
    return Policy.ask(fn)


def when_tools(names: list[str], then: PolicyLike) -> Policy:
    """``then`` for calls of the named tools; abstains otherwise."""
    return Policy.when_tools(names, then)


def when_permission(permission: str, then: PolicyLike) -> Policy:
    """``then`` for tools with this permission (``"r"`` or ``"rw"``); abstains otherwise."""
    return Policy.when_permission(permission, then)


def when_argument(
    tool: str, field: str, pattern: str, then: PolicyLike, *, whole: bool = True
) -> Policy:
    """``then`` for calls of ``tool`` whose string argument ``field`` matches ``pattern``
    (the whole value, or anywhere when ``whole=False``); abstains otherwise."""
    return Policy.when_argument(tool, field, pattern, then, whole=whole)


def allow_commands(pattern: str) -> Policy:
    """Allow ``exec_command`` calls whose whole ``cmd`` matches ``pattern``."""
    return Policy.when_argument("exec_command", "cmd", pattern, allow_all, whole=True)


def deny_commands(pattern: str) -> Policy:
    """Deny ``exec_command`` calls whose ``cmd`` contains a match of ``pattern``."""
    return Policy.when_argument("exec_command", "cmd", pattern, deny_all, whole=False)


def forbid_commands(pattern: str) -> Policy:
    """Forbid (``"Tool call denied by policy."``) ``exec_command`` calls whose ``cmd`` contains
    a match of ``pattern``."""
    return Policy.when_argument(
        "exec_command", "cmd", pattern, Policy.decide("forbidden"), whole=False
    )


def allow_tools(*names: str) -> Policy:
    """Allow calls of the named tools."""
    return Policy.when_tools(list(names), allow_all)


def deny_tools(*names: str) -> Policy:
    """Deny calls of the named tools."""
    return Policy.when_tools(list(names), deny_all)


def first_match(*policies: PolicyLike) -> Policy:
    """The first verdict of ``policies`` in order (callables always give one)."""
    return Policy.first_match(list(policies))
