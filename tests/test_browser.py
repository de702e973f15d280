"""The published report in a real headless Chromium (Debian's `chromium`) at 1280 x 800: its pages load with no
console error and no network request, the headline figure and the answer table are in the first screen, and a
kernel name with < and > shows as text.

Chromium is driven from its command line: --dump-dom gives the DOM after load, --enable-logging=stderr
prints console messages, and --screenshot keeps what the first screen shows (build/test-artifacts/). Network
requests are caught at the resolver (every host maps to nothing) and read from Chromium's net log; the hosts
Chromium asks for by itself (update and account services) are those it asks for with an empty page too.
Where the figure and the table lie on the screen is read by a copy of the page with a script added (the
report itself allows none): it writes their boxes into the DOM that --dump-dom prints.
"""

import json
import re
import shutil
import subprocess
from html import unescape as html_unescape
from pathlib import Path

import pytest

from kernelscope import report
from workflow_support import ROOT, archived_results

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="chromium not installed (apt-get install chromium)")

ARTIFACTS = ROOT / "build" / "test-artifacts"
#: the archived run rendered (its raw results unpack to results/nvidia-h200)
RUN = "nvidia-h200-6df3c14"
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
    "--disable-sync",
    "--enable-logging=stderr",
    "--v=0",
    "--host-resolver-rules=MAP * ~NOTFOUND",
    "--window-size=1280,800",
]


@pytest.fixture(scope="module")
def page(tmp_path_factory) -> Path:
    """A committed H200 run of the default configuration (85 cases), re-rendered, with a kernel name holding
    < and > in its profile table."""
    root = tmp_path_factory.mktemp("browser")
    results = archived_results(RUN, root)
    path = results / "profile" / "softmax" / "float16" / "M8192_N8192.json"
    doc = json.loads(path.read_text())
    doc["implementations"][0]["kernels"][0]["name"] = "kernel<script>alert(1)</script>"
    path.write_text(json.dumps(doc))
    specs = json.loads((results / "specs.json").read_text())
    softmax = next(c for c in specs["cases"] if c["kernel"] == "softmax")
    softmax["reason"] = "a reason with <b>markup</b> in it"  # prose, not only code cells, stays text
    (results / "specs.json").write_text(json.dumps(specs))
    report.build(results, root / "out")
    return root / "out" / "report.html"


def _chromium(page: Path, *args: str, tmp: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [
            CHROMIUM,
            *FLAGS,
            f"--user-data-dir={tmp / 'profile'}",
            f"--log-net-log={tmp / 'net.json'}",
            *args,
            page.as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )


def _hosts(net_log: Path) -> set[str]:
    return set(re.findall(r'"url":"(?:https?|wss?)://([^/"?:]+)', net_log.read_text()))


def test_page_loads_without_console_errors_or_network_requests(page, tmp_path):
    run = _chromium(page, "--dump-dom", tmp=tmp_path)
    assert run.returncode == 0, run.stderr[-2000:]
    console = [line for line in run.stderr.splitlines() if "CONSOLE" in line or ":INFO:CONSOLE" in line]
    assert console == [], console
    dom = run.stdout
    empty = tmp_path / "empty.html"
    empty.write_text("<!DOCTYPE html><title>empty</title>")
    own = _hosts(_chromium(empty, "--dump-dom", tmp=tmp_path / "empty") and tmp_path / "empty" / "net.json")
    requested = _hosts(tmp_path / "net.json") - own
    assert not requested, f"the page requested {requested}"
    assert "<script" not in dom.split("<body", 1)[1]
    # on the kernel's page (where its case tables are), the name is text, never an element
    dom = _chromium(page.parent / "kernels" / "softmax.html", "--dump-dom", tmp=tmp_path / "softmax").stdout
    assert "kernel&lt;…&gt;alert" in dom and "<script>alert" not in dom  # folded by short_name, as text
    assert "<script" not in dom.split("<body", 1)[1]
    assert "with &lt;b&gt;markup&lt;/b&gt; in it" in dom and "<b>markup" not in dom


def test_answer_table_is_in_the_first_screen(page, tmp_path):
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    shot = ARTIFACTS / "report-first-screen.png"
    run = _chromium(page, f"--screenshot={shot}", tmp=tmp_path)
    assert run.returncode == 0 and shot.stat().st_size > 10_000, run.stderr[-2000:]
    dom = _chromium(page, "--dump-dom", tmp=tmp_path).stdout
    # the answer's table comes before anything else of size: the title, banner and contents fit above it
    body = dom.split("<body", 1)[1]
    before = body.split('id="answer"', 1)[0]
    assert len(before) < 3000 and "<table" in body.split('id="answer"', 1)[1].split("</section>", 1)[0]


def test_every_page_loads_without_console_errors_or_network_requests(page, tmp_path):
    pages = [page.parent / "details.html", *sorted((page.parent / "kernels").glob("*.html"))]
    assert len(pages) > 2
    empty = tmp_path / "empty.html"
    empty.write_text("<!DOCTYPE html><title>empty</title>")
    own = _hosts(_chromium(empty, "--dump-dom", tmp=tmp_path / "empty") and tmp_path / "empty" / "net.json")
    for i, other in enumerate(pages):
        run = _chromium(other, "--dump-dom", tmp=tmp_path / str(i))
        assert run.returncode == 0, run.stderr[-2000:]
        assert [line for line in run.stderr.splitlines() if "CONSOLE" in line] == [], other
        assert not _hosts(tmp_path / str(i) / "net.json") - own, other


#: writes the boxes of the answer's figure and table into the DOM (the probe copy only)
PROBE = """<script>
const box = (q) => { const r = document.querySelector(q).getBoundingClientRect(); return [r.top, r.bottom]; };
document.body.setAttribute("data-layout", JSON.stringify({
  figure: box("#answer figure svg"), table: box("#answer table"), first_row: box("#answer table tbody tr"),
  screen: window.innerHeight, width: document.documentElement.scrollWidth, window_width: window.innerWidth}));
</script>"""


def test_headline_figure_and_answer_table_are_in_the_first_screen(page, tmp_path):
    probe = page.with_name("probe.html")
    html = re.sub(r'<meta http-equiv="Content-Security-Policy"[^>]*>', "", page.read_text())
    probe.write_text(html.replace("</body>", PROBE + "</body>"))
    dom = _chromium(probe, "--dump-dom", tmp=tmp_path).stdout
    layout = json.loads(html_unescape(re.search(r'data-layout="([^"]*)"', dom).group(1)))
    screen = layout["screen"]
    assert 0 < layout["figure"][0] < layout["figure"][1] <= screen, layout  # the whole figure
    assert layout["figure"][1] <= layout["table"][0] < layout["first_row"][1] <= screen, layout  # then the table
    assert layout["width"] <= layout["window_width"], layout  # nothing wider than the window
