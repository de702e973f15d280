# Assemble tables, the roofline and the Markdown/HTML report from every per-case result.
rule report:
    input:
        specs=SPECS,
        environment="results/{device}/environment.json",
        calibration="results/{device}/calibration.json",
        correctness=case_results("correctness"),
        timing=case_results("timing"),
        profile=case_results("profile"),
        ncu=ncu_results(),
        image=container_image(),
    output:
        md="reports/{device}/report.md",
        html="reports/{device}/report.html",
        run="reports/{device}/run.json",
    container:
        CONTAINER_IMAGE
    params:
        python=PYTHON,
    log:
        "logs/{device}/report.log",
    shell:
        "{params.python} -m kernelscope report --results results/{wildcards.device} --out reports/{wildcards.device} "
        "> {log} 2>&1"
