"""The command line: parse, dispatch through `COMMANDS` (one handler per command) in one
`asyncio.run`, map what went wrong to an exit code.

With `console` (what is shown) and the command modules (`live_commands`, `bundle_commands`,
`config_commands`), the only place that prints or exits; what a command collects and judges
is composed in `golive/orchestration`. Exit codes: 0 go-live, 10 observe-with-limits, 11 hold,
12 expand-capacity, 13 rebuild, 2 usage or config error, 3 golive could not do its job
(bundle, local target); `verify`: 0 intact, 1 altered.
"""

from __future__ import annotations

import argparse
import asyncio
from collections.abc import Awaitable, Callable, Mapping, Sequence

from rich.markup import escape

from golive.cli import bundle_commands, config_commands, live_commands
from golive.cli.command_inputs import prepare_outputs
from golive.cli.console import err
from golive.cli.parser import build_parser
from golive.errors import ConfigError, GoliveError, TargetNotMeasurable
from golive.results import EXIT_INTERNAL, EXIT_NOT_MEASURABLE, EXIT_USAGE

# a command's handler: offline ones return the exit code, the others are awaited for it
Handler = Callable[[argparse.Namespace], int | Awaitable[int]]

COMMANDS: Mapping[str, Handler] = {
    "smoke": live_commands.smoke,
    "env": live_commands.env,
    "capacity": live_commands.capacity,
    "cache": live_commands.cache,
    "agent": live_commands.agent,
    "run": live_commands.run,
    "watch": live_commands.watch,
    "demo": live_commands.demo,
    "target": live_commands.target,
    "verify": bundle_commands.verify,
    "decide": bundle_commands.decide,
    "signoff": bundle_commands.signoff,
    "guardrails": bundle_commands.guardrails,
    "rollback": bundle_commands.rollback,
    "report": bundle_commands.report,
    "init": config_commands.init,
    "config": config_commands.config,
}


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        prepare_outputs(args)  # before any work: never a traceback after a whole run
        return asyncio.run(_dispatch(args))
    except ConfigError as exc:
        err.print(f"[red]config error:[/red] {escape(str(exc))}", highlight=False, soft_wrap=True)
        return EXIT_USAGE
    except TargetNotMeasurable as exc:
        err.print(f"[red]{escape(str(exc))}[/red]", highlight=False, soft_wrap=True)
        return EXIT_NOT_MEASURABLE
    except GoliveError as exc:
        err.print(f"[red]golive error:[/red] {escape(str(exc))}", highlight=False, soft_wrap=True)
        return EXIT_INTERNAL
    except KeyboardInterrupt:
        err.print("[yellow]interrupted[/yellow]: the bundle keeps what was written so far")
        return 130


async def _dispatch(args: argparse.Namespace) -> int:
    handler = COMMANDS.get(args.command)
    if handler is None:
        raise ConfigError(f"unknown command {args.command!r}")
    done = handler(args)
    return done if isinstance(done, int) else await done
