# Optional (config ncu: true): Nsight Compute counters for each tuned Triton variant of one case.
# ncu replays kernels, so it takes the GPU alone like the timing rules.
rule ncu:
    input:
        specs=ancient(SPECS),
        sources=kernel_sources,
        sweep=rules.sweep.output[0],
        image=container_image(),
    output:
        "results/{device}/ncu/{kernel}/{dtype}/{shape}.json",
    log:
        "logs/{device}/ncu/{kernel}/{dtype}/{shape}.log",
    benchmark:
        "results/{device}/jobtimes/ncu/{kernel}/{dtype}/{shape}.tsv"
    container:
        CONTAINER_IMAGE
    resources:
        **GPU_RESOURCES,
    params:
        python=PYTHON,
        case=case_args,
        spec=case_digest,
    shell:
        "exec {params.python} -m kernelscope ncu --specs {input.specs} {params.case} --sweep {input.sweep} "
        "--out {output} > {log} 2>&1"
