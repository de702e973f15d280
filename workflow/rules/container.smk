# The pinned CUDA image, needed only when running with --use-singularity; built on the host from env/kernelscope.def
# (the same environment as the Dockerfile), then hashed once for the environment record. Every rule that runs
# `python -m kernelscope` takes the image as an input (container_image()), so it runs after a (re)build.
localrules:
    container_image,
    container_identity,


# Build build/kernelscope.sif with Apptainer (pulls the base image by digest; installs the hash-checked lock).
# It has no `container:` of its own, since it makes the container on the host. That is the one finding of
# `snakemake --lint`, and it is expected.
rule container_image:
    input:
        definition=ks_container.DEFINITION,
        lock=ks_container.LOCK,
        project="pyproject.toml",
    output:
        CONTAINER_IMAGE,
    log:
        "logs/container/build.log",
    shell:
        "apptainer build {output} {input.definition} > {log} 2>&1"


# Record the built image's sha256, its base image reference and digest, and the lock's sha256.
rule container_identity:
    input:
        image=CONTAINER_IMAGE,
        definition=ks_container.DEFINITION,
        lock=ks_container.LOCK,
    output:
        CONTAINER_IDENTITY,
    log:
        "logs/container/identity.log",
    run:
        ks_container.write_identity(input.image, input.definition, input.lock, output[0])
