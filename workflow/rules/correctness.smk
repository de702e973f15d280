# Check every implementation and negative control of one case against the fp64 reference.
rule correctness:
    input:
        specs=ancient(SPECS),
        sources=kernel_sources,
        image=container_image(),
    output:
        "results/{device}/correctness/{kernel}/{dtype}/{shape}.json",
    log:
        "logs/{device}/correctness/{kernel}/{dtype}/{shape}.log",
    benchmark:
        "results/{device}/jobtimes/correctness/{kernel}/{dtype}/{shape}.tsv"
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
        "exec {params.python} -m kernelscope correctness --specs {input.specs} {params.case} --out {output} > {log} 2>&1"
