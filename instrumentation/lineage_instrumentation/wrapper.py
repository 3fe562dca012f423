"""``lineage-instrument [flags] <command> [args...]``: run a program with lineage instrumentation.

In the manner of ``opentelemetry-instrument``: the flags become ``LINEAGE_*`` environment variables
(``--exporters rabbitmq`` is ``LINEAGE_EXPORTERS=rabbitmq``; every configuration key has one, see
docs/configuration.md), the bootstrap folder goes first on ``PYTHONPATH`` so Python runs its
``sitecustomize`` at start-up, and the command is ``exec``'d: it keeps this process's id, so
signals reach the program directly and its exit code is the command's own.

This module imports only the standard library unless flags are given (then the configuration key
list, to check them), so the wrapper adds next to nothing to a program's start-up.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from typing import NoReturn

__all__ = ["build_parser", "main", "split_arguments"]

_PROG = "lineage-instrument"
_BOOTSTRAP_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "bootstrap")
_SHORT_ALIASES = {"--disabled-instrumentations": "--instrumentation-disabled-instrumentations"}
_USAGE = f"{_PROG} [-h] [--<key> VALUE ...] command [args ...]"


def split_arguments(argv: Sequence[str]) -> tuple[list[str], list[str], bool]:
    """``(options, command, wants_help)``: every option takes one value (``--k v`` or ``--k=v``);
    the command starts at the first other word, or after ``--``."""
    options: list[str] = []
    i = 0
    wants_help = False
    while i < len(argv):
        word = argv[i]
        if word == "--":
            return options, list(argv[i + 1 :]), wants_help
        if word in ("-h", "--help"):
            wants_help = True
            i += 1
            continue
        if not word.startswith("-") or word == "-":
            break
        if "=" in word:
            options.append(word)
            i += 1
        else:
            options.extend(argv[i : i + 2])
            i += 2
    return options, list(argv[i:]), wants_help


def build_parser() -> argparse.ArgumentParser:
    """The option parser, one flag per configuration key (imports the key list)."""
    from lineage_sdk.config.keys import config_keys

    parser = argparse.ArgumentParser(
        prog=_PROG,
        usage=_USAGE,
        allow_abbrev=False,
        description="Run a command with lineage auto-instrumentation. Each --flag sets the "
        "LINEAGE_* variable of the same name, then the command is exec'd (same process id, "
        "signals and exit code).",
        epilog="Example: lineage-instrument --exporters rabbitmq --producer-job-namespace shop "
        "python app.py",
    )
    for key in config_keys():
        if key.templated:
            continue
        flags = [key.flag]
        flags += [alias for alias, target in _SHORT_ALIASES.items() if target == key.flag]
        help_text = f"{key.description} [{key.env_var}]".replace("%", "%%")
        parser.add_argument(
            *flags, dest=key.path, metavar=key.type.upper().replace(" ", "_"), help=help_text
        )
    parser.epilog = (parser.epilog or "") + (
        "  Keys of named tables take the name in the flag, e.g. --connections-<name>-uri."
    )
    return parser


def _fail(message: str, code: int = 2) -> NoReturn:
    sys.stderr.write(f"{_PROG}: error: {message}\n")
    raise SystemExit(code)


def _environment_for(options: list[str]) -> dict[str, str]:
    """The ``LINEAGE_*`` variables the flags stand for; exits with a clear message if one is bad."""
    from lineage_sdk.config.keys import env_for_flags
    from lineage_sdk.exceptions import ConfigError

    parser = build_parser()
    try:
        known, unknown = parser.parse_known_args(options)
    except SystemExit as exc:  # argparse printed the problem
        raise SystemExit(2) from exc
    flags: dict[str, str] = {}
    for path, value in vars(known).items():
        if value is not None:
            flags[path.replace(".", "-").replace("_", "-")] = value
    i = 0
    while i < len(unknown):  # templated keys (--connections-<name>-uri) and typos
        token = unknown[i]
        if "=" in token:
            name, value = token.split("=", 1)
            i += 1
        elif i + 1 < len(unknown):
            name, value = token, unknown[i + 1]
            i += 2
        else:
            _fail(f"option {token} needs a value")
        flags[name] = value
    try:
        env = env_for_flags(flags)
        _check_names(env)
    except ConfigError as exc:
        _fail(f"{exc.key}: {exc.allowed}")
    return env


def _check_names(env: dict[str, str]) -> None:
    """Refuse an exporter or instrumentor name given as a flag that nobody registered, with the
    nearest real name: the program must not start with lineage quietly off or a typo ignored."""
    from lineage_sdk.config.names import (
        EXPORTER_GROUP,
        INSTRUMENTOR_GROUP,
        check_component_names,
    )

    named = (
        ("exporters", EXPORTER_GROUP, ()),
        ("instrumentation.disabled_instrumentations", INSTRUMENTOR_GROUP, ("all", "*")),
    )
    for path, group, extra in named:
        text = env.get("LINEAGE_" + path.replace(".", "_").upper())
        if text is not None:
            names = [name.strip() for name in text.split(",") if name.strip()]
            if group == INSTRUMENTOR_GROUP:
                names = [name.lower() for name in names]  # as the bootstrap compares them
            check_component_names(path, names, group=group, extra=extra)


def main(argv: Sequence[str] | None = None) -> NoReturn:
    """Parse flags, set the environment and ``exec`` the command (never returns)."""
    args = list(sys.argv[1:] if argv is None else argv)
    options, command, wants_help = split_arguments(args)
    if wants_help:
        build_parser().print_help()
        raise SystemExit(0)
    if not command:
        _fail(f"no command given\nusage: {_USAGE}")
    env = dict(os.environ)
    if options:
        env.update(_environment_for(options))
    existing = env.get("PYTHONPATH")
    env["PYTHONPATH"] = _BOOTSTRAP_DIR + (os.pathsep + existing if existing else "")
    sys.stdout.flush()
    sys.stderr.flush()
    try:
        os.execvpe(command[0], command, env)  # noqa: S606 - running the user's command is the point
    except FileNotFoundError:
        _fail(f"command not found: {command[0]}", 127)
    except PermissionError:
        _fail(f"permission denied: {command[0]}", 126)
    except OSError as exc:
        _fail(f"cannot run {command[0]}: {exc.strerror}", 126)


if __name__ == "__main__":
    main()
