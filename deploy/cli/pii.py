"""``agentcards pii new-key``: a fresh key for AGENTCARDS_PII_KEY (docs/privacy.md)."""

from __future__ import annotations

import typer

from shared.privacy.keys import new_key

pii_app = typer.Typer(help="Privacy: the PII vault's key.", no_args_is_help=True)


@pii_app.callback()
def _pii() -> None:
    """Privacy: the PII vault's key."""


@pii_app.command("new-key")
def new_key_command() -> None:
    """Print a fresh key (urlsafe base64 of 32 random bytes) for AGENTCARDS_PII_KEY."""
    typer.echo(new_key())
