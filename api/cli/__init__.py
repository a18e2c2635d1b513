"""The client subcommands of the `logbroker` command (they use `api.client`).

`parser` adds them to the command line without importing them; `run` runs the
chosen one. Nothing is imported here, so that `serve` loads none of them.
"""
