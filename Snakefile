# kernelscope: correctness, launch-config sweeps, timing and kernel-name profiles for every
# kernel x shape x dtype, assembled into a Markdown + HTML report per device.
#
#   snakemake --cores 1                    # on this machine (CPU: Triton's interpreter, tiny shapes)
#   snakemake --cores 1 --use-singularity  # every GPU rule inside the pinned container (profiles/default adds --nv)
#
# Results path grammar (see kernelscope/cases.py):
#   results/<device>/specs.json | environment.json | calibration.json
#   results/<device>/correctness/<kernel>/<dtype>/<shape>.json
#   results/<device>/sweep/<kernel>/<dtype>/<shape>.json
#   results/<device>/timing/<kernel>/<dtype>/<shape>.json
#   results/<device>/profile/<kernel>/<dtype>/<shape>.json
#   results/<device>/ncu/<kernel>/<dtype>/<shape>.json         (optional: config ncu: true or a case list)
#   results/<device>/benchmarks/<stage>/<kernel>/<dtype>/<shape>.tsv  (job wall times)
#   reports/<device>/report.md | report.html | run.json | plots/*.svg | tables/*.csv
#   reports/<device>/compare/<other>/report.md | report.html | comparison.csv  (optional: config compare_with)
#   reports/index.md | index.html                                (every run and comparison under reports/)
#   logs/<device>/<stage>/<kernel>/<dtype>/<shape>.log

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
        f"reports/{DEVICE}/report.md",
        f"reports/{DEVICE}/report.html",
        expand(f"reports/{DEVICE}/compare/{{other}}/report.md", other=config["compare_with"]),
        "reports/index.html",
