# Compile and time every launch config of every Triton variant of one case.
rule sweep:
    input:
        specs=ancient(SPECS),
        sources=kernel_sources,
        image=container_image(),
    output:
        "results/{device}/sweep/{kernel}/{dtype}/{shape}.json",
    log:
        "logs/{device}/sweep/{kernel}/{dtype}/{shape}.log",
    benchmark:
        "results/{device}/jobtimes/sweep/{kernel}/{dtype}/{shape}.tsv"
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
        "exec {params.python} -m kernelscope sweep --specs {input.specs} {params.case} --out {output} > {log} 2>&1"
