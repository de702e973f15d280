# Compile and time every launch config of one Triton variant on one case.
rule sweep:
    input:
        specs=SPECS,
        module=kernel_module,
    output:
        "results/{device}/sweep/{kernel}/{dtype}/{shape}/{variant}.json",
    params:
        case=case_args,
    resources:
        gpu_share=GPU_EXCLUSIVE,
    log:
        "logs/{device}/sweep/{kernel}/{dtype}/{shape}/{variant}.log",
    shell:
        "{PYTHON} -m kernelscope sweep --specs {input.specs} {params.case} --variant {wildcards.variant} "
        "--out {output} > {log} 2>&1"
