"""What every command's ``--help`` shows: each option's default and the
exit codes. Shared by ``gnnperf run``'s parser and the gate wing's."""
from __future__ import annotations

import argparse


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


def command_parser(sub, name: str, **kwargs) -> argparse.ArgumentParser:
    """A subcommand whose --help shows every default and the exit codes."""
    return sub.add_parser(name, formatter_class=HelpFormatter, epilog=EXIT_CODES, **kwargs)
