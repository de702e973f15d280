# Record software, hardware and provenance of the machine that runs the GPU rules.
rule environment:
    input:
        specs=SPECS,
        image=container_image(),
        identity=container_identity(),
    output:
        "results/{device}/environment.json",
    log:
        "logs/{device}/environment.log",
    priority: 20
    container:
        CONTAINER_IMAGE
    resources:
        **GPU_RESOURCES,
    params:
        python=PYTHON,
        extra=environment_extra,
    shell:
        "exec {params.python} -m kernelscope environment --specs {input.specs} {params.extra} --out {output} > {log} 2>&1"


# Measure this device's ceilings: copy bandwidth and library matmul peak per dtype.
rule calibrate:
    input:
        specs=ancient(SPECS),
        image=container_image(),
    output:
        "results/{device}/calibration.json",
    log:
        "logs/{device}/calibrate.log",
    priority: 20
    container:
        CONTAINER_IMAGE
    resources:
        **GPU_RESOURCES,
    params:
        python=PYTHON,
        spec=JOB_DIGESTS["calibration"],
    shell:
        "exec {params.python} -m kernelscope calibrate --specs {input.specs} --out {output} > {log} 2>&1"
