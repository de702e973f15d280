# kernelscope: correctness, launch-config sweeps, timing and kernel-name profiles for every
# kernel x shape x dtype, assembled into a Markdown + HTML report per device.
#
#   snakemake --cores 1                    # on this machine (CPU: Triton's interpreter, tiny shapes)
#   snakemake --cores 1 --use-singularity  # every GPU rule inside the pinned container (profiles/default adds --nv)
#
# What each stage writes where (the results path grammar): kernelscope/cases.py's docstring.

import sys

from snakemake.exceptions import WorkflowError
from snakemake.utils import min_version, validate

min_version("9.0")
sys.path.insert(0, workflow.basedir)

from kernelscope import configuration as ks_configuration

CONFIG_FILE = "config/config.yaml"
CONFIG_SCHEMA = "workflow/schemas/config.schema.yaml"
# Config errors are raised again as WorkflowError: Snakemake prints its message without a traceback.
# Snakemake's own message for a config file that is not valid YAML names neither the file nor the line.
try:
    ks_configuration.check_yaml(CONFIG_FILE)
except ks_configuration.ConfigError as exc:
    raise WorkflowError(str(exc)) from None


configfile: CONFIG_FILE


# --config values typed as the schema says (Snakemake passes nested ones as strings); every schema error
# with the file and line (or --config) it came from and what is allowed; then Snakemake fills in the defaults
try:
    CONFIG_SOURCES = ks_configuration.settle(
        config, workflow.config_settings, CONFIG_FILE, f"{workflow.basedir}/{CONFIG_SCHEMA}"
    )
except ks_configuration.ConfigError as exc:
    raise WorkflowError(str(exc)) from None
validate(config, schema=CONFIG_SCHEMA)


include: "workflow/rules/common.smk"
include: "workflow/rules/container.smk"
include: "workflow/rules/specs.smk"
include: "workflow/rules/environment.smk"
include: "workflow/rules/correctness.smk"
include: "workflow/rules/sweep.smk"
include: "workflow/rules/timing.smk"
include: "workflow/rules/profile.smk"
include: "workflow/rules/ncu.smk"
include: "workflow/rules/report.smk"
include: "workflow/rules/compare.smk"


rule all:
    default_target: True
    input:
        expand(rules.report.output.md, device=DEVICE),
        expand(rules.report.output.html, device=DEVICE),
        expand(rules.compare.output.md, other=config["compare_with"]),
        # and every result the report reads: Snakemake rebuilds a missing file only for a job that needs it or
        # as a target, and the report, up to date, needs nothing, so a deleted result would stay deleted
        expand(rules.report.input, device=DEVICE),
