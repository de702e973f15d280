"""GPU clock, temperature, power and throttle state through NVML (``nvidia-ml-py``), read per sample.

An H200 idles at 345 MHz and ramps under load, so a sample taken before the clock settles can be 2x
slow. The monitor records what the clocks were for every sample; :func:`flag_samples` marks samples
taken while a throttle reason other than idle was active, or with the SM clock below 95 % of the steady
clock measured after the warm-up. Flagged samples are disclosed in the report, never silently dropped.
"""

from __future__ import annotations

from typing import Any

# Throttle reasons that are not a slowdown of a busy GPU (idle, application clocks as set, display).
_BENIGN_REASONS = {"gpu_idle", "applications_clocks_setting", "display_clock_setting"}
STEADY_FRACTION = 0.95


class ClockMonitor:
    """Reads NVML for the card with ``uuid`` (the job's bound GPU, :mod:`kernelscope.gpus`), else for the
    card CUDA calls device 0. NVML numbers cards in PCI order whatever ``CUDA_VISIBLE_DEVICES`` says, so an
    index would name the wrong card on a multi-GPU host. ``available`` is False (with ``reason``) when NVML
    cannot be used."""

    def __init__(self, uuid: str | None = None) -> None:
        self.available = False
        self.reason = None
        self.steady_sm_mhz: float | None = None
        try:
            import pynvml

            pynvml.nvmlInit()
            self._nvml = pynvml
            if uuid is None or uuid.startswith("PRETEND-"):
                uuid = _cuda_device_uuid()
            self._handle = pynvml.nvmlDeviceGetHandleByUUID(uuid) if uuid else pynvml.nvmlDeviceGetHandleByIndex(0)
            self._reasons = {
                name.removeprefix("nvmlClocksEventReason").removeprefix("nvmlClocksThrottleReason"): getattr(
                    pynvml, name
                )
                for name in dir(pynvml)
                if name.startswith(("nvmlClocksEventReason", "nvmlClocksThrottleReason"))
                and not name.endswith(("All", "None", "Unknown"))
            }
            self.available = True
        except Exception as exc:  # noqa: BLE001 - no NVML (CPU machine, container without driver libs)
            self.reason = f"NVML unavailable: {type(exc).__name__}: {exc}"

    def read(self) -> dict[str, Any]:
        if not self.available:
            return {}
        n = self._nvml
        h = self._handle
        out: dict[str, Any] = {}
        for key, fn in (
            ("sm_mhz", lambda: n.nvmlDeviceGetClockInfo(h, n.NVML_CLOCK_SM)),
            ("mem_mhz", lambda: n.nvmlDeviceGetClockInfo(h, n.NVML_CLOCK_MEM)),
            ("temp_c", lambda: n.nvmlDeviceGetTemperature(h, n.NVML_TEMPERATURE_GPU)),
            ("power_w", lambda: n.nvmlDeviceGetPowerUsage(h) / 1000.0),
        ):
            try:
                out[key] = fn()
            except Exception:  # noqa: BLE001 - an unreadable field stays absent
                pass
        try:
            getter = (
                getattr(n, "nvmlDeviceGetCurrentClocksEventReasons", None)
                or n.nvmlDeviceGetCurrentClocksThrottleReasons
            )
            mask = getter(h)
            out["throttle"] = sorted({_snake(name) for name, bit in self._reasons.items() if mask & bit})
        except Exception:  # noqa: BLE001
            pass
        return out

    def static_info(self) -> dict[str, Any]:
        if not self.available:
            return {"nvml": self.reason}
        n, h = self._nvml, self._handle
        info: dict[str, Any] = {}
        for key, fn in (
            ("max_sm_mhz", lambda: n.nvmlDeviceGetMaxClockInfo(h, n.NVML_CLOCK_SM)),
            ("max_mem_mhz", lambda: n.nvmlDeviceGetMaxClockInfo(h, n.NVML_CLOCK_MEM)),
            ("power_limit_w", lambda: n.nvmlDeviceGetPowerManagementLimit(h) / 1000.0),
            ("driver", lambda: _str(n.nvmlSystemGetDriverVersion())),
            ("persistence_mode", lambda: n.nvmlDeviceGetPersistenceMode(h)),
            ("uuid", lambda: _str(n.nvmlDeviceGetUUID(h))),
        ):
            try:
                info[key] = fn()
            except Exception:  # noqa: BLE001
                pass
        return info

    def settle(self, workload, seconds: float = 1.0) -> None:
        """Run ``workload`` until the SM clock is steady and remember that steady clock."""
        import time

        if not self.available:
            return
        readings = []
        t_end = time.perf_counter() + seconds
        while time.perf_counter() < t_end:
            workload()
            readings.append(self.read().get("sm_mhz", 0))
        tail = readings[len(readings) // 2 :] or readings
        self.steady_sm_mhz = float(sorted(tail)[len(tail) // 2]) if tail else None


def _cuda_device_uuid() -> str | None:
    """NVML's name (``GPU-…``) of the card CUDA calls device 0, where torch exposes the UUID."""
    try:
        import torch

        uuid = getattr(torch.cuda.get_device_properties(0), "uuid", None)
        return f"GPU-{uuid}" if uuid is not None else None
    except Exception:  # noqa: BLE001 - an older torch: fall back to NVML's index 0
        return None


def _str(value) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _snake(name: str) -> str:
    out = []
    for i, ch in enumerate(name):
        if ch.isupper() and i:
            out.append("_")
        out.append(ch.lower())
    return "".join(out)


def flag_samples(readings: list[dict[str, Any]], steady_sm_mhz: float | None) -> dict[str, Any]:
    """Per-sample flags: throttled (a non-benign throttle reason) or slow clock (below 95 % of steady)."""
    flags = []
    for r in readings:
        reasons = [t for t in r.get("throttle", []) if t not in _BENIGN_REASONS]
        slow = (
            steady_sm_mhz is not None and r.get("sm_mhz") is not None and r["sm_mhz"] < STEADY_FRACTION * steady_sm_mhz
        )
        flag = []
        if reasons:
            flag.append("throttled:" + "+".join(reasons))
        if slow:
            flag.append(f"sm_clock<{STEADY_FRACTION:.0%}_steady")
        flags.append(",".join(flag))
    sm = [r["sm_mhz"] for r in readings if "sm_mhz" in r]
    return {
        "steady_sm_mhz": steady_sm_mhz,
        "sm_mhz": sm,
        "mem_mhz": [r.get("mem_mhz") for r in readings],
        "temp_c": [r.get("temp_c") for r in readings],
        "power_w": [r.get("power_w") for r in readings],
        "flags": flags,
        "n_flagged": sum(1 for f in flags if f),
        "sm_mhz_min": min(sm) if sm else None,
        "sm_mhz_max": max(sm) if sm else None,
    }
