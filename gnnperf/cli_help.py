"""What every command's ``--help`` shows (each option's default and the
exit codes), the one line a mistyped option gets instead of the usage, and
``--verbose``. Shared by ``gnnperf run``'s parser and the gate wing's."""
from __future__ import annotations

import argparse
from typing import NoReturn


#: Every command's exit status, in its --help.
EXIT_CODES = """exit status:
  0    pass
  1    a failure or regression: a variant failed, a check failed, the gate found
       a regression, bisect's answer is not confirmed
  2    bad input: a usage or set-up error, one line naming the fix
  130  interrupted"""


class HelpFormatter(argparse.ArgumentDefaultsHelpFormatter, argparse.RawDescriptionHelpFormatter):
    """argparse's default-showing help, for options whose default is a value:
    a flag (off) or an option that does nothing unless given (None) shows
    no "(default: None)", and a help that states its default keeps its own
    words. The epilog (the exit codes) keeps its lines."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        if action.default is None or action.default is False or "default" in text:
            return text
        return super()._get_help_string(action)


class OneLineParser(argparse.ArgumentParser):
    """argparse's parser whose usage errors (a value its type refuses, an
    unknown option, a missing argument) are one line and exit 2, the rule
    for bad input: the whole usage, twenty lines, buries what was wrong and
    ``--help`` shows it on request. Subcommand parsers are of the same class
    (``add_subparsers`` makes its parent's)."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {' '.join(message.split())}\n")


VERBOSE_HELP = "on an error, print its traceback above the one line (default: the line alone)"


def add_verbose(parser: argparse.ArgumentParser, command: bool = True) -> None:
    """``--verbose`` on :obj:`parser`. A command's is suppressed unless given:
    argparse copies a subcommand's defaults over its parent's values, so a
    default there would undo ``gnnperf --verbose <command>``."""
    parser.add_argument("--verbose", action="store_true", help=VERBOSE_HELP,
                        default=argparse.SUPPRESS if command else False)


def command_parser(sub, name: str, handler, **kwargs) -> argparse.ArgumentParser:
    """A subcommand whose --help shows every default and the exit codes, and
    which takes ``--verbose`` as the top level does. :obj:`handler` (the
    parsed arguments to an exit status) is what ``gnnperf <name>`` runs:
    registering a command's parser registers its handler, so the two cannot
    drift apart."""
    parser = sub.add_parser(name, formatter_class=HelpFormatter, epilog=EXIT_CODES, **kwargs)
    parser.set_defaults(handler=handler)
    add_verbose(parser)
    return parser
