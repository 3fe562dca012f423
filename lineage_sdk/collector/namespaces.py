"""Namespace patterns, as API keys' grants and alert rules name namespaces: a namespace as
written, or with ``*`` matching any run of characters."""

from __future__ import annotations

import re
from collections.abc import Iterable

__all__ = ["NamespaceScope"]


class NamespaceScope:
    """Namespace patterns: a namespace as written, or with ``*`` matching any run of characters
    (dots and slashes included). ``*`` alone is every namespace."""

    __slots__ = ("_exact", "_regex", "everything", "patterns")

    def __init__(self, patterns: Iterable[str]) -> None:
        self.patterns = tuple(patterns)
        self.everything = "*" in self.patterns
        self._exact = frozenset(p for p in self.patterns if "*" not in p)
        globs = [p for p in self.patterns if "*" in p and p != "*"]
        self._regex = (
            re.compile(
                "|".join("(?:" + ".*".join(map(re.escape, g.split("*"))) + ")" for g in globs),
                re.DOTALL,
            )
            if globs
            else None
        )

    def allows(self, namespace: str) -> bool:
        if self.everything or namespace in self._exact:
            return True
        return self._regex is not None and self._regex.fullmatch(namespace) is not None

    def __repr__(self) -> str:
        return f"NamespaceScope({list(self.patterns)!r})"
