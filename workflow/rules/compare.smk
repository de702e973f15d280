# Optional (config compare_with: [<device>, ...]): this run against another run whose results/<device>/ tree
# was copied next to this one. The document says first whether the two runs can be compared at all.
rule compare:
    input:
        report=expand(rules.report.output.md, device=DEVICE),
        other="results/{other}/specs.json",
        image=container_image(),
    output:
        md=f"reports/{DEVICE}/compare/{{other}}/report.md",
        html=report(
            f"reports/{DEVICE}/compare/{{other}}/report.html", category="Comparisons", labels={"against": "{other}"}
        ),
        csv=report(
            f"reports/{DEVICE}/compare/{{other}}/comparison.csv",
            category="Comparisons",
            labels={"against": "{other}", "file": "table"},
        ),
    log:
        f"logs/{DEVICE}/compare/{{other}}.log",
    container:
        CONTAINER_IMAGE
    params:
        python=PYTHON,
        mine=f"results/{DEVICE}",
        theirs=get_other_results,
        out=get_compare_out,
    shell:
        "{params.python} -m kernelscope compare --a {params.mine} --b {params.theirs} --out {params.out} > {log} 2>&1"
