# Capture which CUDA kernels each implementation of one case launches.
rule profile:
    input:
        specs=ancient(SPECS),
        sources=kernel_sources,
        sweep=rules.sweep.output[0],
        image=container_image(),
    output:
        "results/{device}/profile/{kernel}/{dtype}/{shape}.json",
    log:
        "logs/{device}/profile/{kernel}/{dtype}/{shape}.log",
    benchmark:
        "results/{device}/jobtimes/profile/{kernel}/{dtype}/{shape}.tsv"
    priority: 5
    container:
        CONTAINER_IMAGE
    resources:
        **GPU_RESOURCES,
    params:
        python=PYTHON,
        case=case_args,
        spec=case_digest,
    shell:
        "exec {params.python} -m kernelscope profile --specs {input.specs} {params.case} --sweep {input.sweep} "
        "--out {output} > {log} 2>&1"
