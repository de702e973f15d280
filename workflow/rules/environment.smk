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


# The rerun calibration this run's claims are judged by, copied into results/ (the reading side reads
# results/ alone); without one, the record says so and no device-time ordering is claimed. It reads only the
# device's name from specs.json, which narrowing a run does not change (hence ancient()).
rule reruns:
    input:
        specs=ancient(SPECS),
        source=RERUN_CALIBRATION or [],
        image=container_image(),
    output:
        "results/{device}/reruns.json",
    log:
        "logs/{device}/reruns.log",
    container:
        CONTAINER_IMAGE
    params:
        python=PYTHON,
    shell:
        "exec {params.python} -m kernelscope reruns --specs {input.specs} --source '{input.source}' "
        "--out {output} > {log} 2>&1"
