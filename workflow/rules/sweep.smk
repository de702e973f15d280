# Compile and time every launch config of every Triton variant of one case.
rule sweep:
    input:
        specs=SPECS,
        sources=kernel_sources,
        image=container_image(),
    output:
        "results/{device}/sweep/{kernel}/{dtype}/{shape}.json",
    params:
        python=PYTHON,
        case=case_args,
    priority: 5
    resources:
        **GPU_RESOURCES,
    container:
        CONTAINER_IMAGE
    log:
        "logs/{device}/sweep/{kernel}/{dtype}/{shape}.log",
    benchmark:
        "results/{device}/jobtimes/sweep/{kernel}/{dtype}/{shape}.tsv"
    shell:
        "{params.python} -m kernelscope sweep --specs {input.specs} {params.case} --out {output} > {log} 2>&1"
