"""``python -m lineage_sdk.collector.api``: serve the API, as ``lineage-collector serve`` does."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

__all__ = ["app", "main"]

app = typer.Typer(add_completion=False, pretty_exceptions_enable=False)


@app.command()
def serve_command(
    config_path: Annotated[
        Path | None,
        typer.Option("--config", "-c", help="TOML file with a \\[lineage] table.", dir_okay=False),
    ] = None,
    host: Annotated[str | None, typer.Option(help="Address to listen on.")] = None,
    port: Annotated[int | None, typer.Option(help="Port to listen on (default 5000).")] = None,
    api_key: Annotated[
        str | None,
        typer.Option(
            envvar="LINEAGE_API_API_KEY",
            help="Require this key for ingest (prefer the environment variable).",
            show_default=False,
        ),
    ] = None,
    protect_reads: Annotated[
        bool | None, typer.Option("--protect-reads/--open-reads", help="Reads need the key too.")
    ] = None,
    max_body_bytes: Annotated[int | None, typer.Option(min=1, help="Request body cap.")] = None,
    log_level: Annotated[str, typer.Option(help="uvicorn log level.")] = "info",
    insecure: Annotated[
        bool,
        typer.Option(
            "--insecure", help="Listen on a non-loopback address without an API key (logged)."
        ),
    ] = False,
) -> None:
    """Serve the OpenLineage ingest, the read API and the graph page."""
    from lineage_sdk.collector.api.server import serve
    from lineage_sdk.collector.logs import configure_logging
    from lineage_sdk.config import load_config, redact
    from lineage_sdk.exceptions import LineageError

    try:
        config = load_config(path=config_path, openlineage_client=False)
        configure_logging(log_level)
        serve(
            config,
            host,
            port,
            api_key=api_key,
            protect_reads=protect_reads,
            max_body_bytes=max_body_bytes,
            log_level=log_level,
            insecure=insecure,
        )
    except LineageError as exc:
        typer.echo(f"lineage api: error: {redact(str(exc))}", err=True)
        raise typer.Exit(2) from None


def main() -> None:
    app(prog_name="python -m lineage_sdk.collector.api")


if __name__ == "__main__":
    main()
