"""The ``trustjudge`` command line: a thin shell over :class:`trustjudge.Judge`.

The judging commands (score, compare, criteria, checklist, claims, and any registered or installed mode's
command) are built from the mode registry by ``_mode_command``, with what a built-in command adds in
``_score`` and ``_modes``; the other commands have a module each. The options several commands take are
defined once in ``_options``, and what their output shares in ``_common``. The command modules import
those, never this package, so the package has no import cycle.
"""

from __future__ import annotations

import sys

import click

from ..errors import TrustJudgeError
from ._audit import audit
from ._common import err, fail, is_utf8
from ._judges import judges
from ._mode_command import ModeGroup, mode_commands, registered_modes
from ._modes import CHECKLIST, CLAIMS, CRITERIA
from ._options import JUDGE_FACTORY, make_judge
from ._rank import rank
from ._recipes import recipes, run
from ._report import report
from ._sample import check_sample, sample
from ._score import COMPARE, SCORE
from ._serve import serve
from ._store import store
from ._summary import summary
from ._trust import calibrate, select

__all__ = ["cli", "main"]

_make_judge = make_judge
"""The factory every command builds its judge with; the group reads it when a command runs, so a test
(or a program embedding the CLI) may replace it."""


HOOKS = {"score": SCORE, "compare": COMPARE, "criteria": CRITERIA, "checklist": CHECKLIST, "claims": CLAIMS}
"""What the built-in modes' commands add to the ones the registry gives, by command."""


@click.group(cls=ModeGroup)
@click.version_option(package_name="trustjudge")
@click.pass_context
def cli(ctx: click.Context) -> None:
    """trustjudge: LLM-as-a-judge with distribution-sensitive scores and likelihood-aware verdicts."""
    ctx.meta[JUDGE_FACTORY] = _make_judge


for _command in (*mode_commands(registered_modes(), HOOKS).values(), audit, rank, report, serve, store, calibrate,
                 select, summary, recipes, run, judges, sample, check_sample):
    cli.add_command(_command)


def _safe_std_streams() -> None:
    """On a terminal or pipe that is not UTF-8, write what it cannot show as escapes instead of failing
    (JSON records on such a standard output are written with \\u escapes: the same JSON)."""
    for stream in (sys.stdout, sys.stderr):
        if not is_utf8(stream) and hasattr(stream, "reconfigure"):
            stream.reconfigure(errors="backslashreplace")


def main() -> None:
    """Entry point: turns trustjudge errors into one clear line and exit status 2."""
    _safe_std_streams()
    try:
        cli.main(standalone_mode=False)
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)
    except click.ClickException as exc:
        exc.show()
        sys.exit(exc.exit_code)
    except click.exceptions.Abort:  # click turns Ctrl-C into Abort
        err.print("interrupted: every finished batch is in the store; run the same command to resume")
        sys.exit(130)
    except TrustJudgeError as exc:
        sys.exit(fail(str(exc)))
    except OSError as exc:  # a file or device failed (unreadable input, full disk): one line, no traceback
        where = f"{exc.filename}: " if exc.filename else ""
        sys.exit(fail(f"{where}{exc.strerror or exc}"))
    except KeyboardInterrupt:
        err.print("interrupted: every finished batch is in the store; run the same command to resume")
        sys.exit(130)
