# kernelscope: correctness, launch-config sweeps, timing and kernel-name profiles for every
# kernel x shape x dtype, assembled into a Markdown + HTML report per device.
#
#   snakemake --cores 1                    # on this machine (CPU: Triton's interpreter, tiny shapes)
#   snakemake --cores 1 --use-singularity  # every GPU rule inside the pinned container (profiles/default adds --nv)
#
# What each stage writes where (the results path grammar): kernelscope/cases.py's docstring.

from snakemake.utils import min_version, validate

min_version("9.0")


configfile: "config/config.yaml"


validate(config, schema="workflow/schemas/config.schema.yaml")


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
