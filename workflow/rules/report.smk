# Assemble tables, figures, run.json and the Markdown/HTML report (first page, details, a page per kernel) from every per-case result. The report,
# figures and tables are flagged for `snakemake --report report.zip` (the workflow's own provenance report).
rule report:
    input:
        specs=SPECS,
        environment=rules.environment.output[0],
        calibration=rules.calibrate.output[0],
        reruns=rules.reruns.output[0],
        correctness=case_results("correctness"),
        timing=case_results("timing"),
        profile=case_results("profile"),
        ncu=ncu_results(),
        image=container_image(),
    output:
        md="reports/{device}/report.md",
        html=report("reports/{device}/report.html", category="Report", labels={"device": "{device}"}),
        details_md="reports/{device}/details.md",
        details_html="reports/{device}/details.html",
        kernels=directory("reports/{device}/kernels"),
        run="reports/{device}/run.json",
        plots=report(directory("reports/{device}/plots"), patterns=["{name}.svg"], category="Figures"),
        tables=expand(
            "reports/{{device}}/tables/{table}",
            table=REPORT_TABLES,
        ),
    log:
        "logs/{device}/report.log",
    container:
        CONTAINER_IMAGE
    params:
        python=PYTHON,
    shell:
        "{params.python} -m kernelscope report --results results/{wildcards.device} --out reports/{wildcards.device} "
        "> {log} 2>&1"
