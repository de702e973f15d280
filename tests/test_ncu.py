"""The optional Nsight Compute stage: command, CSV parsing, and every way it can decline to run."""

import pytest

from kernelscope import ncu

# The layout of `ncu --csv --page raw` (header of metric names, a units row, one row per kernel), with
# ncu's own messages before it. Written from the format's description, not captured from a GPU run.
SAMPLE = '''==PROF== Connected to process 4242
==PROF== Profiling "_row_softmax_kernel": 0%....50%....100% - 9 passes
"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","gpu__time_duration.sum","dram__throughput.avg.pct_of_peak_sustained_elapsed","sm__warps_active.avg.pct_of_peak_sustained_active","launch__registers_per_thread","l1tex__t_bytes_pipe_lsu_mem_local_op_ld.sum","l1tex__t_bytes_pipe_lsu_mem_local_op_st.sum","launch__shared_mem_per_block"
"","","","","","","","nsecond","%","%","register/thread","byte","byte","byte"
"0","4242","python3","host","_row_softmax_kernel","1","7","5,952","88.31","71.2","32","0","0","0"
"1","4242","python3","host","_online_softmax_kernel","1","7","8,096","61.70","45.0","40","1,024","2,048","512"
==PROF== Disconnected from process 4242
'''


def test_parse_reads_each_profiled_kernel_and_its_metrics():
    rows = ncu.parse_csv(SAMPLE)
    assert [r["kernel"] for r in rows] == ["_row_softmax_kernel", "_online_softmax_kernel"]
    assert rows[0]["duration_ns"] == 5952 and rows[0]["dram_throughput_pct"] == pytest.approx(88.31)
    assert rows[1]["registers_per_thread"] == 40 and rows[1]["local_store_bytes"] == 2048


def test_parse_without_a_table_is_empty():
    assert ncu.parse_csv("==ERROR== ERR_NVGPUCTRPERM - no permission to access the counters") == []


def test_command_leaves_clocks_alone_and_profiles_only_between_start_and_stop():
    cmd = ncu.command(["python", "-m", "kernelscope", "ncu-target"])
    assert cmd[cmd.index("--clock-control") + 1] == "none"
    assert cmd[cmd.index("--profile-from-start") + 1] == "off"
    assert all(metric in cmd[cmd.index("--metrics") + 1] for metric in ncu.METRICS.values())


def test_stage_declines_without_a_gpu_or_without_ncu(monkeypatch):
    assert ncu.run(["x"], ["a"], on_gpu=False) == {"ran": False, "reason": "no CUDA device (Triton interpreter run)"}
    monkeypatch.setattr(ncu.shutil, "which", lambda name: None)
    assert "not on PATH" in ncu.run(["x"], ["a"], on_gpu=True)["reason"]


def test_stage_reports_a_launch_count_mismatch(monkeypatch):
    monkeypatch.setattr(ncu.shutil, "which", lambda name: "/usr/bin/ncu")

    class Done:
        returncode, stdout, stderr = 0, SAMPLE, ""

    monkeypatch.setattr(ncu.subprocess, "run", lambda *a, **k: Done())
    ok = ncu.run(["x"], ["triton_row", "triton_online"], on_gpu=True)
    assert ok["ran"] and [k["implementation"] for k in ok["kernels"]] == ["triton_row", "triton_online"]
    bad = ncu.run(["x"], ["triton_row"], on_gpu=True)
    assert not bad["ran"] and "expected 1 profiled launches" in bad["reason"]
