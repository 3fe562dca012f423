"""Which output column each SELECT expression feeds, by position, as SQL assigns them.

``openlineage-sql`` names a SELECT's outputs after their aliases or column names (``_0``, ``_1``
for unnamed expressions) and says nothing of positions, but SQL maps them by position:
``INSERT INTO t (a, b) SELECT x + 1, sum(y) ...`` writes ``x + 1`` into ``a``. This module reads
the statement's shape itself (a small tokenizer, no grammar) and rewrites its query so that the
``i``-th expression of branch ``b`` is aliased ``__ol_<b>_<i>``; parsing that query with
``openlineage-sql`` then gives each expression's input columns, and its position the output
column:

- ``INSERT INTO t (cols) SELECT ...`` (also with ``WITH``, ``DISTINCT``, and each branch of a
  ``UNION``/``INTERSECT``/``EXCEPT``): the ``i``-th expression to the ``i``-th listed column;
- ``INSERT INTO t SELECT ...``: to the ``i``-th column of ``t`` when its columns are known
  (:class:`SchemaMemory`), else nothing;
- ``CREATE TABLE t [(cols)] AS SELECT ...``: to the listed name, else the expression's own
  (alias or column name; an unnamed expression's name is the database's, and left out);
- ``UPDATE t SET col = expr [FROM ...]``: ``expr`` to ``col``.

``*`` and ``q.*`` are expanded when the one table the query reads is named directly in its
``FROM`` and its columns are known; otherwise a statement with ``*`` gets no positional mapping.
Each expression is classified as ``IDENTITY`` (a bare column), ``AGGREGATION`` (an aggregate
call outside a window) or ``TRANSFORMATION`` (anything else); ``openlineage-sql`` has no such
classification of its own. Whatever this module cannot read gives ``None``: the caller then
reports no column lineage for the statement, never a guess.
"""

from __future__ import annotations

import re
import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import NamedTuple

__all__ = [
    "ALIAS_PREFIX",
    "SCHEMAS",
    "Output",
    "Plan",
    "SchemaMemory",
    "ddl_effect",
    "plan",
]

ALIAS_PREFIX = "__ol_"
_MAX_KNOWN_TABLES = 4096

_LEXEMES = r"""
    (?P<ws>\s+|--[^\n]*|/\*[\s\S]*?\*/)
    |(?P<str>[Ee]'(?:[^'\\]|''|\\.)*'|[NnBbXxUu]?'(?:[^']|'')*'
      |\$(?P<tag>(?:[A-Za-z_]\w*)?)\$[\s\S]*?\$(?P=tag)\$)
    |(?P<qid>"(?:[^"]|"")*"|`(?:[^`]|``)*`BRACKETS)
    |(?P<param>\$\d+|\?\d*|(?<!:):[A-Za-z_]\w*|%\(\w+\)s|%s)
    |(?P<num>\d+(?:\.\d*)?(?:[eE][+-]?\d+)?|\.\d+)
    |(?P<id>[^\W\d]\w*(?:\$\w*)*)
    |(?P<op>::|[^\s\w])
"""
_TOKEN = re.compile(_LEXEMES.replace("BRACKETS", ""), re.VERBOSE)
# SQLite and SQL Server also quote names in brackets (PostgreSQL's are array subscripts)
_TOKEN_BRACKETS = re.compile(_LEXEMES.replace("BRACKETS", r"|\[[^\]]*\]"), re.VERBOSE)

# A SELECT list ends at one of these, at its own depth.
_LIST_END = frozenset(
    {
        "FROM",
        "INTO",
        "WHERE",
        "GROUP",
        "HAVING",
        "WINDOW",
        "ORDER",
        "LIMIT",
        "OFFSET",
        "FETCH",
        "UNION",
        "INTERSECT",
        "EXCEPT",
        "MINUS",
        "QUALIFY",
        "FOR",
        "RETURNING",
        "ON",
    }
)
_SET_OPS = frozenset({"UNION", "INTERSECT", "EXCEPT", "MINUS"})
# Words that are values or expression syntax, never a column or an alias.
_NOT_A_COLUMN = frozenset(
    {
        "NULL",
        "TRUE",
        "FALSE",
        "DEFAULT",
        "CURRENT_DATE",
        "CURRENT_TIME",
        "CURRENT_TIMESTAMP",
        "LOCALTIME",
        "LOCALTIMESTAMP",
        "CURRENT_USER",
        "SESSION_USER",
        "USER",
        "END",
        "PRECISION",
        "ZONE",
        "VARYING",
        "DAY",
        "HOUR",
        "MINUTE",
        "SECOND",
        "MONTH",
        "YEAR",
        "ASC",
        "DESC",
        "NULLS",
        "FIRST",
        "LAST",
        "ROWS",
        "ONLY",
    }
)
# Words after which a trailing identifier is part of the expression, not its alias.
_BEFORE_NO_ALIAS = frozenset(
    {
        "AS",
        "COLLATE",
        "OVER",
        "IS",
        "NOT",
        "AND",
        "OR",
        "THEN",
        "ELSE",
        "WHEN",
        "CASE",
        "LIKE",
        "ILIKE",
        "IN",
        "BETWEEN",
        "DISTINCT",
        "FROM",
        "INTERVAL",
        "DATE",
        "TIME",
        "TIMESTAMP",
        "WITH",
        "WITHOUT",
        "DOUBLE",
        "CHARACTER",
        "ESCAPE",
        "SIMILAR",
        "TO",
        "AT",
        "ANY",
        "ALL",
        "SOME",
        "EXISTS",
        "ARRAY",
        "ROW",
        "SELECT",
    }
)
_AGGREGATES = frozenset(
    {
        "sum",
        "count",
        "avg",
        "min",
        "max",
        "array_agg",
        "string_agg",
        "group_concat",
        "listagg",
        "bool_and",
        "bool_or",
        "every",
        "bit_and",
        "bit_or",
        "bit_xor",
        "json_agg",
        "jsonb_agg",
        "json_object_agg",
        "jsonb_object_agg",
        "json_group_array",
        "json_group_object",
        "stddev",
        "stddev_pop",
        "stddev_samp",
        "variance",
        "var_pop",
        "var_samp",
        "corr",
        "covar_pop",
        "covar_samp",
        "percentile_cont",
        "percentile_disc",
        "mode",
        "median",
        "total",
        "xmlagg",
        "any_value",
        "regr_avgx",
        "regr_avgy",
        "regr_count",
        "regr_intercept",
        "regr_r2",
        "regr_slope",
        "regr_sxx",
        "regr_sxy",
        "regr_syy",
    }
)
# Functions whose result does not carry the input's values (OpenLineage's ``masking``).
_MASKING = frozenset(
    {"count", "md5", "sha1", "sha224", "sha256", "sha384", "sha512", "hashtext", "crc32"}
)
_CONSTRAINTS = frozenset(
    {
        "CONSTRAINT",
        "PRIMARY",
        "UNIQUE",
        "CHECK",
        "FOREIGN",
        "EXCLUDE",
        "KEY",
        "INDEX",
        "FULLTEXT",
        "SPATIAL",
        "PERIOD",
    }
)


class _Tok(NamedTuple):
    kind: str  # str, qid, param, num, id, op (whitespace and comments are no tokens)
    text: str
    start: int
    end: int
    depth: int  # parentheses (and brackets) open before this token
    upper: str  # identifiers upper-cased (keyword tests); "" otherwise


def _tokens(text: str, dialect: str) -> list[_Tok] | None:
    """The statement's tokens, or None when it does not read as SQL (unbalanced brackets)."""
    out: list[_Tok] = []
    depth = 0
    scanner = _TOKEN_BRACKETS if dialect in ("sqlite", "mssql") else _TOKEN
    for found in scanner.finditer(text):  # every character is in some token
        kind = found.lastgroup
        if kind == "ws" or kind is None:
            continue
        value = found.group()
        if kind == "tag":
            kind = "str"
        elif kind == "op":
            if value == ")" or value == "]":
                depth -= 1
                if depth < 0:
                    return None
            elif value == "(" or value == "[":
                out.append(_Tok(kind, value, found.start(), found.end(), depth, ""))
                depth += 1
                continue
        out.append(
            _Tok(
                kind,
                value,
                found.start(),
                found.end(),
                depth,
                value.upper() if kind == "id" else "",
            )
        )
    return out if depth == 0 else None


def _split(toks: list[_Tok], depth: int) -> list[list[_Tok]]:
    """``toks`` cut at the commas of ``depth``."""
    parts: list[list[_Tok]] = [[]]
    for tok in toks:
        if tok.text == "," and tok.depth == depth:
            parts.append([])
        else:
            parts[-1].append(tok)
    return parts


def _ident(tok: _Tok, fold: bool) -> str:
    """An identifier token's name: quotes removed (and kept as written), else folded if asked."""
    if tok.kind == "qid":
        quote = tok.text[0]
        inner = tok.text[1:-1]
        return inner.replace(quote * 2, quote) if quote in '"`' else inner
    return tok.text.lower() if fold else tok.text


def _is_name(tok: _Tok) -> bool:
    return tok.kind == "qid" or (tok.kind == "id" and tok.upper not in _NOT_A_COLUMN)


Source = tuple[str, tuple[str, ...]]  # a table read: its name (last part), its known columns


@dataclass(frozen=True, slots=True)
class Output:
    """One written column: its name, and how its position's expression computes it."""

    column: str
    alias: str  # ``__ol_<branch>_<position>``: the expression's alias in :attr:`Plan.query`
    subtype: str  # IDENTITY, TRANSFORMATION or AGGREGATION
    masking: bool
    description: str  # the expression, as written (empty for IDENTITY)


@dataclass(frozen=True, slots=True)
class Plan:
    """A statement's query rewritten with positional aliases, and what each position writes."""

    query: str
    outputs: tuple[Output, ...]
    schema_dependent: bool  # read known columns (of the target, or of ``*``'s table)
    created: tuple[str, ...] | None = None  # CREATE TABLE AS: the new table's columns, if known


@dataclass(frozen=True, slots=True)
class _Item:
    expression: list[_Tok]
    alias: _Tok | None


def _item(toks: list[_Tok]) -> _Item | None:
    """One SELECT item: its expression and its alias (``AS a``, or a trailing ``a``)."""
    if not toks:
        return None
    last = toks[-1]
    if len(toks) >= 3 and toks[-2].upper == "AS" and toks[-2].depth == last.depth:
        return _Item(toks[:-2], last) if _is_name(last) else None
    if len(toks) >= 2 and _is_name(last):
        before = toks[-2]
        if before.depth == last.depth and (
            before.kind in ("qid", "num", "str", "param")
            or before.text in (")", "]")
            or (before.kind == "id" and before.upper not in _BEFORE_NO_ALIAS)
        ):
            return _Item(toks[:-1], last)
    return _Item(toks, None)


def _column_ref(expr: list[_Tok]) -> _Tok | None:
    """The column a bare reference (``c``, ``t.c``, ``s.t.c``) names, else None."""
    if len(expr) % 2 == 0:
        return None
    for i, tok in enumerate(expr):
        if i % 2 == 0:
            if not _is_name(tok):
                return None
        elif tok.text != ".":
            return None
    return expr[-1]


def _star(expr: list[_Tok]) -> _Tok | bool:
    """``*`` -> True, ``q.*`` -> the qualifier's last token, else False."""
    if len(expr) == 1 and expr[0].text == "*":
        return True
    if len(expr) >= 3 and expr[-1].text == "*" and expr[-2].text == ".":
        return expr[-3]
    return False


def _classify(expr: list[_Tok], text: str, dialect: str) -> tuple[str, bool, str]:
    """``(subtype, masking, description)`` of one SELECT expression."""
    if _column_ref(expr) is not None:
        return "IDENTITY", False, ""
    description = " ".join(text[expr[0].start : expr[-1].end].split())[:500]
    aggregate = False
    masking = False
    for i, tok in enumerate(expr[:-1]):
        if tok.kind != "id" or expr[i + 1].text != "(":
            continue
        name = tok.text.lower()
        if name in _MASKING:
            masking = True
        if name not in _AGGREGATES:
            continue
        close = _closing(expr, i + 1)
        if dialect == "sqlite" and name in ("min", "max"):
            args = expr[i + 2 : close]
            if any(a.text == "," and a.depth == tok.depth + 1 for a in args):
                continue  # SQLite's min(a, b) and max(a, b) are scalar functions
        after = expr[close + 1 : close + 2]
        if after and after[0].upper == "FILTER":
            close = _closing(expr, close + 2)
            after = expr[close + 1 : close + 2]
        if after and after[0].upper == "OVER":
            continue  # a window function keeps the rows: a transformation
        aggregate = True
    return ("AGGREGATION" if aggregate else "TRANSFORMATION"), masking, description


def _closing(toks: list[_Tok], open_index: int) -> int:
    depth = toks[open_index].depth
    for j in range(open_index + 1, len(toks)):
        if toks[j].text in ")]" and toks[j].depth == depth:
            return j
    return len(toks) - 1


def _find(toks: list[_Tok], start: int, depth: int, words: frozenset[str]) -> int:
    """The index of the first token at ``depth`` from ``start`` that is one of ``words``."""
    for j in range(start, len(toks)):
        tok = toks[j]
        if tok.depth < depth:
            return j
        if tok.depth == depth and (tok.upper in words or tok.text == ";"):
            return j
    return len(toks)


@dataclass(frozen=True, slots=True)
class _Select:
    items: list[_Item]
    spans: list[tuple[int, int]]  # each item's token range
    end: int  # the token that ends the list (FROM, ...), or len(toks)
    table: tuple[list[_Tok], _Tok | None] | None  # FROM <one table> [[AS] alias]: name, alias


_FROM_END = _LIST_END | {"JOIN", "INNER", "LEFT", "RIGHT", "FULL", "CROSS", "NATURAL"}


def _select_list(toks: list[_Tok], at: int) -> _Select | None:
    """The SELECT whose keyword is ``toks[at]``: its items, up to the end of its list."""
    depth = toks[at].depth
    j = at + 1
    while j < len(toks) and toks[j].upper in ("DISTINCT", "ALL"):
        if toks[j].upper == "DISTINCT" and j + 1 < len(toks) and toks[j + 1].upper == "ON":
            if j + 2 >= len(toks) or toks[j + 2].text != "(":
                return None
            j = _closing(toks, j + 2) + 1
        else:
            j += 1
    if j >= len(toks) or toks[j].upper == "TOP":
        return None
    end = j
    while True:
        end = _find(toks, end, depth, _LIST_END)
        # ``a IS DISTINCT FROM b`` is an expression, not the list's end
        if end < len(toks) and toks[end].upper == "FROM" and toks[end - 1].upper == "DISTINCT":
            end += 1
            continue
        break
    items: list[_Item] = []
    spans: list[tuple[int, int]] = []
    begin = j
    for k in range(j, end + 1):
        if k == end or (toks[k].text == "," and toks[k].depth == depth):
            item = _item(toks[begin:k])
            if item is None:
                return None
            items.append(item)
            spans.append((begin, k))
            begin = k + 1
    table = None
    if end < len(toks) and toks[end].upper == "FROM":
        source = toks[end + 1 : _find(toks, end + 1, depth, _FROM_END)]
        if source and all(t.depth == depth and t.text not in ",(" for t in source):
            alias = None
            if len(source) >= 2 and _is_name(source[-1]) and source[-2].text != ".":
                alias = source[-1]
                source = source[:-2] if source[-2].upper == "AS" else source[:-1]
            if _column_ref(source) is not None:
                table = (source, alias)
    return _Select(items, spans, end, table)


def _expand_star(star: _Tok | bool, branch: _Select, source: Source | None, fold: bool) -> bool:
    """Whether ``*`` (True) or ``q.*`` (``q``) can be expanded to the columns of ``source``:
    the query's FROM names that one table, whose columns are known, and ``q`` is that table or
    its alias."""
    if source is None or branch.table is None:
        return False
    name, alias = branch.table
    if _ident(name[-1], fold) != source[0]:
        return False  # a CTE or another relation of the same statement
    if star is True:
        return True
    qualifier = _ident(star, fold) if isinstance(star, _Tok) else None
    own = alias if alias is not None else name[-1]
    return qualifier == _ident(own, fold)


def _quote(name: str, dialect: str) -> str:
    if dialect == "mysql":
        return "`" + name.replace("`", "``") + "`"
    return '"' + name.replace('"', '""') + '"'


class SchemaMemory:
    """Columns of tables, learnt from the ``CREATE TABLE`` statements the instrumentors saw.

    Keyed by ``(namespace, dataset name)``; bounded. ``epoch`` changes with every change, so an
    analysis that read it knows when it may be stale. Only statements the instrumentors record
    teach it (a ``CREATE TABLE IF NOT EXISTS`` teaches nothing: the table may have been older);
    ``ALTER TABLE`` and ``DROP TABLE`` make it forget the table.
    """

    __slots__ = ("epoch", "lock", "tables")

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.tables: OrderedDict[tuple[str, str], tuple[str, ...]] = OrderedDict()
        self.epoch = 0

    def get(self, namespace: str, name: str) -> tuple[str, ...] | None:
        return self.tables.get((namespace, name))

    def apply(
        self, namespace: str, changes: tuple[tuple[str, tuple[str, ...] | None], ...]
    ) -> None:
        """Learn (``columns``) or forget (``None``) each ``(name, columns)`` of ``changes``."""
        with self.lock:
            changed = False
            for name, columns in changes:
                key = (namespace, name)
                if self.tables.get(key) == columns:
                    continue
                changed = True
                if columns is None:
                    self.tables.pop(key, None)
                else:
                    self.tables[key] = columns
                    self.tables.move_to_end(key)
                    if len(self.tables) > _MAX_KNOWN_TABLES:
                        self.tables.popitem(last=False)
            if changed:
                self.epoch += 1

    def clear(self) -> None:
        with self.lock:
            self.tables.clear()
            self.epoch += 1


SCHEMAS = SchemaMemory()


def _leading_with(toks: list[_Tok], text: str) -> tuple[str, int]:
    """A ``WITH ...`` clause before the statement: its text and the index after it."""
    if not toks or toks[0].upper != "WITH":
        return "", 0
    j = 1
    while j < len(toks) and not (
        toks[j].depth == 0 and toks[j].upper in ("INSERT", "UPDATE", "SELECT", "DELETE", "MERGE")
    ):
        j += 1
    if j >= len(toks):
        return "", 0
    return text[toks[0].start : toks[j].start], j


def plan(
    text: str,
    dialect: str,
    fold: bool,
    target_columns: tuple[str, ...] | None,
    source: Source | None,
) -> Plan | None:
    """The positional plan of ``text`` (an INSERT, CREATE TABLE AS or UPDATE), or None when
    it is none of those or is not read here.

    ``target_columns``: the written table's known columns (for an INSERT without a column
    list); ``source``: the one table the statement reads, ``(name, known columns)`` (for ``*``).
    """
    toks = _tokens(text, dialect)
    if not toks:
        return None
    prefix, j = _leading_with(toks, text)
    if j >= len(toks):
        return None
    head = toks[j].upper
    if head == "INSERT":
        return _insert(toks, j, text, prefix, dialect, fold, target_columns, source)
    if head == "UPDATE":
        return _update(toks, j, text, prefix, dialect, fold)
    if head == "CREATE" and not prefix:
        return _create_as(toks, j, text, dialect, fold, source)
    return None


def _branches(toks: list[_Tok], k: int, depth: int) -> list[_Select] | None:
    """The SELECT at ``toks[k]`` and those joined to it by UNION, INTERSECT, EXCEPT."""
    branches: list[_Select] = []
    while True:
        found = _select_list(toks, k)
        if found is None:
            return None
        branches.append(found)
        end = _find(toks, found.end, depth, _SET_OPS)
        if end >= len(toks) or toks[end].upper not in _SET_OPS:
            return branches
        k = end + 1
        while k < len(toks) and toks[k].upper in ("ALL", "DISTINCT"):
            k += 1
        if k >= len(toks) or toks[k].upper != "SELECT":
            return None  # a parenthesised branch: not read


def _query_end(toks: list[_Tok], start: int, depth: int) -> int:
    """The index after the query: before ON CONFLICT, ON DUPLICATE KEY, RETURNING or ``;``."""
    for m in range(start, len(toks)):
        tok = toks[m]
        if tok.depth == depth and (
            tok.text == ";"
            or tok.upper == "RETURNING"
            or (
                tok.upper == "ON"
                and m + 1 < len(toks)
                and toks[m + 1].upper in ("CONFLICT", "DUPLICATE")
            )
        ):
            return m
    return len(toks)


def _query_plan(
    toks: list[_Tok],
    at: int,
    text: str,
    prefix: str,
    dialect: str,
    fold: bool,
    source: Source | None,
) -> tuple[str, list[list[_Item]], list[str | None], bool] | None:
    """The query starting at ``toks[at]`` with its SELECT items aliased by branch and position
    (``__ol_<b>_<i>``): its text, each branch's items (``*`` expanded), the first branch's own
    names (None when unnamed) and whether a ``*`` was expanded."""
    if at >= len(toks) or toks[at].text == "(":
        return None
    depth = toks[at].depth
    k = at
    while k < len(toks) and not (toks[k].depth == depth and toks[k].upper == "SELECT"):
        if toks[k].depth == depth and toks[k].upper == "VALUES":
            return None
        k += 1
    if k >= len(toks):
        return None
    branches = _branches(toks, k, depth)
    if branches is None:
        return None
    stop = _query_end(toks, branches[-1].end, depth)
    used_star = False
    rewrites: list[tuple[int, int, str]] = []
    every: list[list[_Item]] = []
    first_names: list[str | None] = []
    for b, branch in enumerate(branches):
        parts: list[str] = []
        items: list[_Item] = []
        names: list[str | None] = []
        for item in branch.items:
            expression = item.expression
            star = _star(expression)
            if star is not False:
                if item.alias is not None or prefix or not _expand_star(star, branch, source, fold):
                    return None
                used_star = True
                qualifier = "" if star is True else text[expression[0].start : expression[-2].end]
                for column in source[1] if source is not None else ():
                    ref = f"{qualifier}{_quote(column, dialect)}"
                    parts.append(f"{ref} AS {ALIAS_PREFIX}{b}_{len(parts)}")
                    items.append(_Item(_tokens(ref, dialect) or [], None))
                    names.append(column)
                continue
            written = text[expression[0].start : expression[-1].end]
            parts.append(f"{written} AS {ALIAS_PREFIX}{b}_{len(parts)}")
            items.append(item)
            named = item.alias if item.alias is not None else _column_ref(expression)
            names.append(_ident(named, fold) if named is not None else None)
        if not every:
            first_names = names
        elif len(parts) != len(every[0]):
            return None  # branches of different widths: the database refuses it
        lo, hi = branch.spans[0][0], branch.spans[-1][1] - 1
        rewrites.append((toks[lo].start, toks[hi].end, ", ".join(parts)))
        every.append(items)
    pieces: list[str] = [prefix]
    cursor = toks[at].start
    for lo_char, hi_char, replacement in rewrites:
        pieces.append(text[cursor:lo_char])
        pieces.append(replacement)
        cursor = hi_char
    pieces.append(text[cursor : toks[stop - 1].end])
    return "".join(pieces), every, first_names, used_star


def _classify_items(
    branches: list[list[_Item]], columns: list[str | None], text: str, dialect: str
) -> tuple[Output, ...]:
    """An :class:`Output` for each expression of each branch that writes a named column
    (expanded ``*`` items are bare columns: IDENTITY)."""
    return tuple(
        Output(column, f"{ALIAS_PREFIX}{b}_{i}", *_classify(item.expression, text, dialect))
        for b, items in enumerate(branches)
        for i, (item, column) in enumerate(zip(items, columns, strict=True))
        if column is not None  # an unnamed CREATE TABLE AS column: its name is the database's
    )


def _name_end(toks: list[_Tok], k: int) -> int:
    """The index after a (dotted) table name starting at ``toks[k]``."""
    while k < len(toks) and (toks[k].text == "." or _is_name(toks[k])):
        if toks[k].upper in ("SELECT", "WITH", "VALUES", "OVERRIDING", "AS", "SET"):
            break
        k += 1
    return k


def _column_list(toks: list[_Tok], k: int, fold: bool) -> tuple[list[str], int] | None:
    """The names of a ``(a, b, ...)`` list at ``toks[k]`` and the index after it; None when
    it holds anything but names (column definitions, a query)."""
    close = _closing(toks, k)
    names: list[str] = []
    for part in _split(toks[k + 1 : close], toks[k].depth + 1):
        if len(part) != 1 or not _is_name(part[0]):
            return None
        names.append(_ident(part[0], fold))
    return names, close + 1


def _insert(
    toks: list[_Tok],
    j: int,
    text: str,
    prefix: str,
    dialect: str,
    fold: bool,
    target_columns: tuple[str, ...] | None,
    source: Source | None,
) -> Plan | None:
    k = j + 1
    while k < len(toks) and toks[k].upper != "INTO":
        k += 1  # INSERT OR REPLACE INTO, INSERT IGNORE INTO
    k = _name_end(toks, k + 1)
    if k < len(toks) and toks[k].upper == "AS":  # INSERT INTO t AS alias (PostgreSQL)
        k += 2
    listed: list[str] | None = None
    if k < len(toks) and toks[k].text == "(":
        found = _column_list(toks, k, fold)
        if found is None:
            return None
        listed, k = found
    if k < len(toks) and toks[k].upper == "OVERRIDING":  # OVERRIDING SYSTEM VALUE
        k += 3
    query = _query_plan(toks, k, text, prefix, dialect, fold, source)
    if query is None:
        return None
    rewritten, branches, _names, used_star = query
    width = len(branches[0])
    columns: list[str | None]
    if listed is not None:
        if len(listed) != width:
            return None  # the database refuses it: nothing to map
        columns = list(listed)
    elif target_columns is None or width > len(target_columns):
        return None  # unknown target columns: no guess
    else:
        columns = list(target_columns[:width])  # the rest get their defaults
    outputs = _classify_items(branches, columns, text, dialect)
    return Plan(rewritten, outputs, used_star or listed is None)


def _create_as(
    toks: list[_Tok], j: int, text: str, dialect: str, fold: bool, source: Source | None
) -> Plan | None:
    at = _find(toks, j + 1, 0, frozenset({"TABLE", "VIEW", "INDEX", "AS"}))
    if at >= len(toks) or toks[at].upper != "TABLE":
        return None
    k = at + 1
    fresh = True  # IF NOT EXISTS: the table may be older, with other columns
    if [t.upper for t in toks[k : k + 3]] == ["IF", "NOT", "EXISTS"]:
        fresh = False
        k += 3
    k = _name_end(toks, k)
    listed: list[str] = []
    if k < len(toks) and toks[k].text == "(":
        found = _column_list(toks, k, fold)
        if found is None:
            return None  # column definitions: no query
        listed, k = found
    if k >= len(toks) or toks[k].upper != "AS":
        return None
    query = _query_plan(toks, k + 1, text, "", dialect, fold, source)
    if query is None or len(listed) > len(query[1][0]):
        return None
    rewritten, branches, names, used_star = query
    columns: list[str | None] = [*listed, *names[len(listed) :]]
    outputs = _classify_items(branches, columns, text, dialect)
    named = [c for c in columns if c is not None]
    created = tuple(named) if fresh and len(named) == len(columns) else None
    return Plan(rewritten, outputs, used_star, created)


_UPDATE_END = frozenset({"FROM", "WHERE", "RETURNING", "ORDER", "LIMIT"})


def _update(
    toks: list[_Tok], j: int, text: str, prefix: str, dialect: str, fold: bool
) -> Plan | None:
    k = j + 1
    while k < len(toks) and toks[k].upper in ("OR", "ONLY", "LOW_PRIORITY", "IGNORE"):
        k += 2 if toks[k].upper == "OR" else 1  # UPDATE OR REPLACE (SQLite)
    set_at = _find(toks, k, 0, frozenset({"SET"}))
    if set_at >= len(toks) or toks[set_at].upper != "SET" or set_at == k:
        return None
    end = _find(toks, set_at + 1, 0, _UPDATE_END)
    parts: list[str] = []
    items: list[_Item] = []
    columns: list[str] = []
    for assignment in _split(toks[set_at + 1 : end], 0):
        eq = next((i for i, t in enumerate(assignment) if t.text == "=" and t.depth == 0), None)
        if eq is None:
            return None
        column = _column_ref(assignment[:eq])
        expression = assignment[eq + 1 :]
        if column is None or not expression or expression[0].upper == "DEFAULT":
            continue  # (a, b) = (...), or a default: no expression of one column to read
        written = text[expression[0].start : expression[-1].end]
        parts.append(f"{written} AS {ALIAS_PREFIX}0_{len(parts)}")
        items.append(_Item(expression, None))
        columns.append(_ident(column, fold))
    if not parts:
        return None
    # The assignments as a SELECT over the updated table and the FROM list.
    table = text[toks[k].start : toks[set_at - 1].end]
    query = f"{prefix}SELECT {', '.join(parts)} FROM {table}"  # noqa: S608 - parsed, never run
    if end < len(toks) and toks[end].upper == "FROM":
        stop = _find(toks, end + 1, 0, _UPDATE_END - {"FROM"})
        if stop <= end + 1:
            return None
        query += f", {text[toks[end + 1].start : toks[stop - 1].end]}"
    return Plan(query, _classify_items([items], list(columns), text, dialect), False)


def ddl_effect(text: str, dialect: str, fold: bool) -> tuple[str, tuple[str, ...]] | None:
    """What a DDL statement says of its tables' columns: ``("learn", columns)`` for a
    ``CREATE TABLE t (definitions)``; ``("as", ())`` for ``CREATE TABLE ... AS`` (learnt from
    its :class:`Plan`); ``("forget", ())`` for a ``CREATE TABLE`` whose columns are not all
    known here; ``("drop", ())`` for ``ALTER TABLE`` and ``DROP TABLE``; None for anything
    else."""
    head = text.lstrip()[:6].upper()
    if not head.startswith(("CREATE", "ALTER", "DROP")):
        return None
    toks = _tokens(text, dialect)
    if not toks:
        return None
    at = _find(toks, 1, 0, frozenset({"TABLE", "VIEW", "INDEX", "AS", "SEQUENCE"}))
    if at >= len(toks) or toks[at].upper != "TABLE":
        return None
    if toks[0].upper != "CREATE":
        return "drop", ()
    if {t.upper for t in toks[1:at]} & {"TEMP", "TEMPORARY"}:
        return None  # a temporary table is nobody else's dataset
    k = at + 1
    if [t.upper for t in toks[k : k + 3]] == ["IF", "NOT", "EXISTS"]:
        return "forget", ()  # the table may be older, with other columns
    k = _name_end(toks, k)
    if k < len(toks) and toks[k].upper == "AS":
        return "as", ()
    if k >= len(toks) or toks[k].text != "(":
        return "forget", ()  # PARTITION OF, OF type, ...
    close = _closing(toks, k)
    rest = {t.upper for t in toks[close + 1 :] if t.depth == 0}
    if rest & {"AS", "INHERITS"}:
        return ("as", ()) if "AS" in rest else ("forget", ())
    columns: list[str] = []
    for part in _split(toks[k + 1 : close], 1):
        first = part[0] if part else None
        if first is None or first.upper == "LIKE" or len(part) < 2:
            return "forget", ()  # LIKE other: its columns are not written here
        if first.upper in _CONSTRAINTS:
            continue
        if not _is_name(first):
            return "forget", ()
        columns.append(_ident(first, fold))
    return ("learn", tuple(columns)) if columns else ("forget", ())
