"""The options several commands share, declared once (name, default, help)."""

from __future__ import annotations

import typer

ResultsOpt = typer.Option("results", "--results", help="results folder")
RopeScalingHelp = "NAME[:key=value...] list (pebench list), all (the default: each run's own), or '' (as trained)"
FigureFormatOpt = typer.Option("png", "--figure-format", help="png | pdf | svg (vector figures for a paper)")
DeviceOpt = typer.Option("auto", "--device", help="auto | cpu | cuda")
OverlayOpt = typer.Option(
    None, "--overlay", help="YAML merged over the config (repeatable), e.g. the one `pebench tune` writes"
)
AttnOpt = typer.Option(
    "auto", "--attention", help="attention backend: auto | sdpa | flex | chunked | banded | relative | math"
)
LrOpt = typer.Option(
    None, "--lr", help="one learning rate for every scheme (default: each scheme's tuned rate); joins the run names"
)
SeedOpt = typer.Option(None, "--seed", help="the training seed (data order and initialisation; default: the config's)")
SeedsOpt = typer.Option(None, "--seeds", help="comma list: one run per seed")
LayersOpt = typer.Option(
    None,
    "--layers",
    help="a scheme and span per layer: a pattern (irope, local-global, swan, nope-rope-alt, NAME:key=value) or a "
    "list, one per layer (rope@w32,rope@c32,none)",
)
TrialsOpt = typer.Option(None, "--trials", help="prompts per cell (= --task-opt trials=N)")
MaxTokensOpt = typer.Option(
    None,
    "--max-tokens",
    help="evaluation stream length in tokens (default: the config's); it keys the records (protocol -mN)",
)
LengthsOpt = typer.Option(None, "--lengths", help="e.g. 512,2048,8192 (default: 1-16x context)")
SplitOpt = typer.Option("validation", "--split", help="validation (day to day, tuning) | test (final numbers)")
GroupPeOpt = typer.Option("classic", "--pe", help="classic, modern, all, or a comma list")
TaskOptOpt = typer.Option(
    None,
    "--task-opt",
    help="a task option, NAME=V or TASK.NAME=V (repeatable), e.g. passkey.depths=0,0.5,1 (pebench list shows them)",
)
LauncherOpt = typer.Option(
    None, "--launcher", help="local | slurm: the jobs as one submitit job array (pip install 'pebench\\[slurm]')"
)
LauncherOptOpt = typer.Option(
    None,
    "--launcher-opt",
    help="NAME=V (repeatable): partition, time_min, cpus_per_task, "
    "gpus_per_task, mem_gb, parallelism, pack, account, qos, "
    "signal_delay_s, folder",
)
EmitSbatchOpt = typer.Option(
    None, "--emit-sbatch", help="write a plain #SBATCH --array script and its job list instead of running"
)
