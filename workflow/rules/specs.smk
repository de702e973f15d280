# Resolve the config into the case list and stage settings that every job reads (config -> specs).
localrules:
    specs,


rule specs:
    input:
        # the kernels' declarations as planned (a regenerated catalog re-plans)
        catalog="kernels/catalog.json",
    output:
        SPECS,
    log:
        f"logs/{DEVICE}/specs.log",
    params:
        config_hash=ks_cases.config_hash(config),
    run:
        ks_cases.write_specs(config, TARGET, output[0])
