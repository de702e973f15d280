# Time the baselines and the tuned Triton variants of one case in one job (A/A blocks included).
rule timing:
    input:
        specs=ancient(SPECS),
        sources=kernel_sources,
        correctness=rules.correctness.output[0],
        sweep=rules.sweep.output[0],
        image=container_image(),
    output:
        "results/{device}/timing/{kernel}/{dtype}/{shape}.json",
    log:
        "logs/{device}/timing/{kernel}/{dtype}/{shape}.log",
    benchmark:
        "results/{device}/jobtimes/timing/{kernel}/{dtype}/{shape}.tsv"
    priority: 10
    container:
        CONTAINER_IMAGE
    resources:
        **GPU_RESOURCES,
    params:
        python=PYTHON,
        case=case_args,
        spec=case_digest,
    shell:
        "exec {params.python} -m kernelscope timing --specs {input.specs} {params.case} --correctness {input.correctness} "
        "--sweep {input.sweep} --out {output} > {log} 2>&1"
