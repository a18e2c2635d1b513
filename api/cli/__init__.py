"""The client subcommands of the `logbroker` command (they use `api.client`)."""

from api.cli.parser import add_client_commands
from api.cli.run import run_client_command

__all__ = ["add_client_commands", "run_client_command"]
