"""A flag declared once: a flags dataclass's field with a help is an option of every command that takes the
dataclass (``cli.flags.takes``), with that help, and reaches the command inside the dataclass; the commands that
train take ``ConfigFlags`` so."""

from dataclasses import dataclass, field
from typing import Optional

import typer
from typer.testing import CliRunner

from pebench.cli.flags import option_fields, takes
from pebench.config import ConfigFlags
from pebench.eval.flags import EvalFlags
from support import invoke


@dataclass(frozen=True)
class Toy:
    size: Optional[int] = field(default=None, metadata={"help": "how big", "decl": "--size"})
    loud: Optional[bool] = field(default=None, metadata={"help": "say it loud", "decl": "--loud/--no-loud"})
    hidden: Optional[str] = None  # no help: not an option


def test_a_field_with_a_help_is_an_option_that_reaches_the_command_in_its_dataclass():
    app, got = typer.Typer(), []

    @app.command()
    @takes(Toy, "toy")
    def cmd(name: str = typer.Option("x", "--name"), toy: Toy = Toy()):
        got.append((name, toy))

    r = CliRunner().invoke(app, ["--size", "3", "--no-loud", "--name", "y"])
    assert r.exit_code == 0, r.output
    assert got == [("y", Toy(size=3, loud=False))]
    help_text = CliRunner().invoke(app, ["--help"]).output
    assert "how big" in help_text and "say it loud" in help_text and "--hidden" not in help_text


def test_the_training_commands_take_every_config_flag_with_its_help():
    helps = {command: invoke(command, "--help").output for command in ("train", "run", "tune", "eval")}
    for f, _ in option_fields(ConfigFlags):
        flag = f.metadata["decl"].split("/")[0]
        assert flag in helps["train"], flag
        assert flag in helps["run"] or f.name == "seed", flag  # run takes --seeds only
    assert {f.name for f, _ in option_fields(ConfigFlags)} >= {"steps", "precision", "sinks", "canon", "normaliser"}
    for f, _ in option_fields(EvalFlags):  # eval takes the whole group, run the part a suite's evaluation reads
        assert f.metadata["decl"] in helps["eval"], f.name
    assert all(flag in helps["run"] for flag in ("--lengths", "--task-opt", "--workers", "--emit-sbatch"))
    assert "--protocol" not in helps["run"] and "--precision" not in helps["tune"]
