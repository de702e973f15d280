"""The optional Nsight Compute stage: command, CSV parsing, attribution by NVTX range, and every way it can
decline to run."""

import pytest

from kernelscope import ncu

# The layout of `ncu --nvtx --csv --page raw` (header of metric names, a units row, one row per kernel, an
# NVTX column holding each kernel's push/pop range stack), with ncu's own messages before it. Written from
# the format's description, not captured from a GPU run. The rows are in the opposite order to the
# implementations' calls: attribution is by range name, never by launch order.
HEADER = (
    '"ID","Process ID","Process Name","Host Name","thread Domain:Push/Pop_Range:PL_Type:PL_Value:CLR_Type:Color:Msg",'
    '"Kernel Name","Context","Stream","gpu__time_duration.sum",'
    '"dram__throughput.avg.pct_of_peak_sustained_elapsed","sm__warps_active.avg.pct_of_peak_sustained_active",'
    '"launch__registers_per_thread","l1tex__t_bytes_pipe_lsu_mem_local_op_ld.sum",'
    '"l1tex__t_bytes_pipe_lsu_mem_local_op_st.sum","launch__shared_mem_per_block"'
)
SAMPLE = f"""==PROF== Connected to process 4242
==PROF== Profiling "_online_softmax_kernel": 0%....50%....100% - 9 passes
{HEADER}
"","","","","","","","","nsecond","%","%","register/thread","byte","byte","byte"
"0","4242","python3","host","<default domain>:kernelscope.triton_online:none:none:none:none","_online_softmax_kernel","1","7","8,096","61.70","45.0","40","1,024","2,048","512"
"1","4242","python3","host","<default domain>:kernelscope.triton_row:none:none:none:none","_row_softmax_kernel","1","7","5,952","88.31","71.2","32","0","0","0"
==PROF== Disconnected from process 4242
"""


def test_parse_reads_each_profiled_kernel_its_implementation_and_its_metrics():
    rows = ncu.parse_csv(SAMPLE)
    assert [(r["implementation"], r["kernel"]) for r in rows] == [
        ("triton_online", "_online_softmax_kernel"),
        ("triton_row", "_row_softmax_kernel"),
    ]
    assert rows[1]["duration_ns"] == 5952 and rows[1]["dram_throughput_pct"] == pytest.approx(88.31)
    assert rows[0]["registers_per_thread"] == 40 and rows[0]["local_store_bytes"] == 2048


def test_parse_without_a_table_is_empty():
    assert ncu.parse_csv("==ERROR== ERR_NVGPUCTRPERM - no permission to access the counters") == []


def test_command_profiles_only_the_implementations_ranges_and_leaves_clocks_alone():
    cmd = ncu.command(["python", "-m", "kernelscope", "ncu-target"], ["triton_row", "triton_online"])
    assert cmd[cmd.index("--clock-control") + 1] == "none"
    assert cmd[cmd.index("--profile-from-start") + 1] == "off"
    assert "--nvtx" in cmd
    includes = [cmd[i + 1] for i, arg in enumerate(cmd) if arg == "--nvtx-include"]
    assert includes == ["kernelscope.triton_row/", "kernelscope.triton_online/"]  # push/pop ranges
    assert all(metric in cmd[cmd.index("--metrics") + 1] for metric in ncu.METRICS.values())
    assert cmd[-4:] == ["python", "-m", "kernelscope", "ncu-target"]


def test_stage_declines_without_a_gpu_or_without_ncu(monkeypatch):
    assert ncu.run(["x"], ["a"], on_gpu=False) == {"ran": False, "reason": "no CUDA device (Triton interpreter run)"}
    monkeypatch.setattr(ncu.shutil, "which", lambda name: None)
    assert "not on PATH" in ncu.run(["x"], ["a"], on_gpu=True)["reason"]


def test_stage_attributes_kernels_by_range_and_reports_any_that_do_not_match(monkeypatch):
    monkeypatch.setattr(ncu.shutil, "which", lambda name: "/usr/bin/ncu")

    class Done:
        returncode, stdout, stderr = 0, SAMPLE, ""

    monkeypatch.setattr(ncu.subprocess, "run", lambda *a, **k: Done())
    ok = ncu.run(["x"], ["triton_row", "triton_online"], on_gpu=True)
    assert ok["ran"]
    assert [(k["implementation"], k["kernel"]) for k in ok["kernels"]] == [
        ("triton_row", "_row_softmax_kernel"),
        ("triton_online", "_online_softmax_kernel"),
    ]
    assert "--nvtx-include kernelscope.triton_row/" in ok["command"]
    bad = ncu.run(["x"], ["triton_row"], on_gpu=True)
    assert not bad["ran"] and "kernels outside them ['_online_softmax_kernel']" in bad["reason"]
    missing = ncu.run(["x"], ["triton_row", "triton_online", "triton_persistent"], on_gpu=True)
    assert not missing["ran"] and "implementations without a kernel ['triton_persistent']" in missing["reason"]


STALL_HEADER = (
    HEADER
    + ","
    + ",".join(
        f'"{ncu.METRICS[k]}"'
        for k in (
            "sm_throughput_pct",
            "l2_throughput_pct",
            "issue_active_pct",
            "stall_long_scoreboard",
            "stall_barrier",
        )
    )
)
STALL_SAMPLE = f"""{STALL_HEADER}
"","","","","","","","","nsecond","%","%","register/thread","byte","byte","byte","%","%","%","",""
"0","1","python3","h","<default domain>:kernelscope.sdpa:none:none:none:none","cudnn_fprop","1","7","830,000","5.0","12.5","168","0","0","115712","71.5","33.5","64.0","1.25","0.5"
"""


def test_parse_reads_utilisation_and_stall_reasons_where_the_csv_has_them():
    (row,) = ncu.parse_csv(STALL_SAMPLE)
    assert row["implementation"] == "sdpa" and row["sm_throughput_pct"] == pytest.approx(71.5)
    assert row["l2_throughput_pct"] == pytest.approx(33.5) and row["l2_bytes"] is None
    assert row["stall_long_scoreboard"] == pytest.approx(1.25) and row["stall_barrier"] == pytest.approx(0.5)
    assert row["stall_wait"] is None  # a metric the CSV lacks is missing, not zero
    (old,) = [r for r in ncu.parse_csv(SAMPLE) if r["implementation"] == "triton_row"]
    assert old["stall_long_scoreboard"] is None and old["dram_throughput_pct"] == pytest.approx(88.31)


def test_the_stage_profiles_the_eager_baselines_beside_the_tuned_variants():
    from kernelscope import registry

    spec = registry.get("softmax")
    shape = spec.shape("cpu", "M3_N5")
    import torch

    names = ncu.profiled_implementations(spec, shape, torch.float16, {"triton_row": {"num_warps": 1}})
    assert names == ["triton_row", "torch"]  # torch_compile (kind compile) left out; untuned variants too


def test_the_report_shows_stall_reasons_only_where_the_record_has_them():
    from kernelscope import report

    new = {"ncu": {"ran": True, "kernels": ncu.parse_csv(STALL_SAMPLE)}}
    block = report._ncu_stall_block(new)
    assert block is not None and "stall_long_scoreboard" in str(block) and "stall_wait" not in str(block)
    assert "l2_throughput_pct" in str(block) and "l2_bytes" not in str(block)
    old = {"ncu": {"ran": True, "kernels": ncu.parse_csv(SAMPLE)}}  # a record from before: no such table
    assert report._ncu_stall_block(old) is None and report._ncu_stall_block({}) is None


ENERGY_HEADER = HEADER + "," + ",".join(f'"{ncu.METRICS[k]}"' for k in ("dram_bytes", "inst_executed", "sm_clock_hz"))
ENERGY_SAMPLE = f"""{ENERGY_HEADER}
"","","","","","","","","nsecond","%","%","register/thread","byte","byte","byte","byte","inst","hz"
"0","1","python3","h","<default domain>:kernelscope.gluon_persistent:none:none:none:none","gemm","1","7","1,600,000","30.0","12.5","168","0","0","200000","412,000,000","9,800,000","1,755,000,000"
"""


def test_dram_bytes_instructions_and_clock_are_read_and_shown_where_the_record_has_them():
    from kernelscope import report

    (row,) = ncu.parse_csv(ENERGY_SAMPLE)
    assert row["dram_bytes"] == 412_000_000 and row["inst_executed"] == 9_800_000
    assert row["sm_clock_hz"] == pytest.approx(1.755e9)
    block = str(report._ncu_stall_block({"ncu": {"ran": True, "kernels": [row]}}))
    assert "dram_bytes" in block and "inst_executed" in block and "sm_clock_hz" in block
    assert "stall_wait" not in block  # counters the CSV lacks stay out of the table
