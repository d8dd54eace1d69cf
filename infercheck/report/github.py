"""GitHub Actions output for `--github` (docs/ci.md): the text GitHub reads, built here without
touching a file. One workflow-command annotation per verdict flag, `::error` for a flag whose code
would fail the run as its headline under the run's `--fail-on` (so a red job always names its
reasons and a green one shows none as errors) and `::warning` for the rest (a notice such as
EDITS_OWN_JUDGES, a verdict the gate lets through); data and properties escaped by GitHub's rules;
`name=value` lines for `$GITHUB_OUTPUT`. The commands module writes them where GitHub looks.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from infercheck.names import Headline
from infercheck.records import Flag, Verdict
from infercheck.verdict import exit_code_for

STEP_SUMMARY = "GITHUB_STEP_SUMMARY"  # the job summary file (Markdown, appended to)
OUTPUT = "GITHUB_OUTPUT"  # the step's outputs file (name=value lines, appended to)
TITLE = "infercheck"
VERDICT_CODES = frozenset(Headline)


class Level(StrEnum):
    ERROR = "error"
    WARNING = "warning"


@dataclass(frozen=True)
class Annotation:
    level: Level
    title: str
    message: str

    def line(self) -> str:
        """The workflow command, e.g. `::error title=infercheck ERROR%3Arun::app/x: crashed`."""
        return f"::{self.level} title={escape_property(self.title)}::{escape_data(self.message)}"


def escape_data(text: str) -> str:
    """A command's message: a line break would end the command, `%` starts an escape."""
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def escape_property(text: str) -> str:
    """A command's property value: as data, and `:` and `,` (which end the properties) escaped."""
    return escape_data(text).replace(":", "%3A").replace(",", "%2C")


def fails_the_run(code: str, fail_on: list[str] | None) -> bool:
    """Whether a flag's code, were it the headline, would exit 1 under `fail_on` (verdict.exit_code_for);
    a code that is no verdict (a notice) never does."""
    return code.split(":")[0] in VERDICT_CODES and exit_code_for(code, fail_on) == 1


def annotation_for(flag: Flag, fail_on: list[str] | None) -> Annotation:
    level = Level.ERROR if fails_the_run(flag.code, fail_on) else Level.WARNING
    return Annotation(level, f"{TITLE} {flag.code}", flag.message)


def annotations(verdict: Verdict, fail_on: list[str] | None) -> list[Annotation]:
    """One annotation per flag of the verdict, in the verdict's order."""
    return [annotation_for(flag, fail_on) for flag in verdict.flags]


def error_annotation(message: str) -> Annotation:
    """A run that ended before any verdict (bad input, exit 2): its one error line, as an annotation."""
    return Annotation(Level.ERROR, TITLE, message)


def output_lines(values: dict[str, str]) -> str:
    """`$GITHUB_OUTPUT` text: `name=value` per line; a value with a line break in GitHub's
    `name<<DELIMITER` form, with a delimiter the value does not contain."""
    out = []
    for name, value in values.items():
        if "\n" not in value and "\r" not in value:
            out.append(f"{name}={value}\n")
            continue
        delimiter = "INFERCHECK_EOF"
        while delimiter in value:
            delimiter += "_"
        out.append(f"{name}<<{delimiter}\n{value}\n{delimiter}\n")
    return "".join(out)
