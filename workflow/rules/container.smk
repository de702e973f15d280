# The pinned CUDA image, needed only when running with --use-singularity; built on the host from env/kernelscope.def
# (the same environment as the Dockerfile) unless config container_image names a pre-built one, then
# identified once for the environment record (a file's sha256, or a registry URI's pinned digest). Every rule that runs
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
        CONTAINER_BUILT,
    log:
        "logs/container/build.log",
    shell:
        "apptainer build {output} {input.definition} > {log} 2>&1"


# Record the image's sha256 (or its URI and pinned digest), the recipe's base image and the lock's sha256.
rule container_identity:
    input:
        image=container_image(),
        definition=ks_container.DEFINITION,
        lock=ks_container.LOCK,
    output:
        CONTAINER_IDENTITY,
    log:
        "logs/container/identity.log",
    params:
        image=CONTAINER_IMAGE,
    run:
        ks_container.write_identity(params.image, input.definition, input.lock, output[0])
