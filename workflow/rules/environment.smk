# Record software, hardware and provenance of the machine that runs the GPU rules.
rule environment:
    input:
        specs=SPECS,
    output:
        "results/{device}/environment.json",
    resources:
        gpu_share=1,
    log:
        "logs/{device}/environment.log",
    shell:
        "{PYTHON} -m kernelscope environment --specs {input.specs} --out {output} > {log} 2>&1"


# Measure this device's ceilings: copy bandwidth and library matmul peak per dtype.
rule calibrate:
    input:
        specs=SPECS,
    output:
        "results/{device}/calibration.json",
    resources:
        gpu_share=GPU_EXCLUSIVE,
    log:
        "logs/{device}/calibrate.log",
    shell:
        "{PYTHON} -m kernelscope calibrate --specs {input.specs} --out {output} > {log} 2>&1"
