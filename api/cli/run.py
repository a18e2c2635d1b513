"""Running a client subcommand: the client from the flags, errors to exit codes.

Exit codes: 0 done; 1 the broker refused (4xx) or the operation failed; 2
usage error; 3 no node could be reached. Errors are one line on stderr,
starting with `logbroker: `.
"""

from __future__ import annotations

import argparse
import os
import ssl
import sys

from api.cli.options import TLS_FLAGS, UsageError
from api.client import Client, ConnectionFailed, InvalidUrl, LogbrokerError, client_tls_context

OK, FAILED, USAGE, UNREACHABLE, INTERRUPTED = 0, 1, 2, 3, 130


def fail(message: str, code: int) -> int:
    print(f"logbroker: {' '.join(message.split())}", file=sys.stderr)
    return code


def tls_context(args: argparse.Namespace) -> ssl.SSLContext | None:
    """The flags, else the environment (LOGBROKER_CA_FILE, ...)."""
    files = [getattr(args, flag[2:].replace("-", "_"), None) or os.environ.get(variable)
             for flag, variable, _ in TLS_FLAGS]
    return client_tls_context(*files)


def run_client_command(args: argparse.Namespace) -> int:
    try:
        with Client(args.url, vhost=args.vhost, timeout=args.timeout,
                    tls=tls_context(args)) as client:
            code: int = args.handler(client, args)
            return code
    except (UsageError, InvalidUrl) as error:
        return fail(str(error), USAGE)
    except ConnectionFailed as error:
        return fail(str(error), UNREACHABLE)
    except LogbrokerError as error:
        kind = error.error.replace("_", " ")
        plain = kind in ("", "error") or str(error).lower().startswith(kind)
        return fail(str(error) if plain else f"{kind}: {error}", FAILED)
    except KeyboardInterrupt:
        return fail("interrupted", INTERRUPTED)
    except BrokenPipeError:
        # The reader went away (`| head`): stop quietly.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return FAILED
    except OSError as error:
        return fail(f"{error.strerror or error}: {error.filename or ''}", FAILED)
