"""The machine header of the report: CPU model, cores, DRAM read bandwidth (bench/stream_probe.cpp,
compiled once into the cache), and the load average, since other work on the box skews figures."""
import json
import os
import platform
import subprocess

HERE = os.path.dirname(os.path.abspath(__file__))
PROBE_SRC = os.path.join(os.path.dirname(HERE), "stream_probe.cpp")


def cpu_model():
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True, check=True).stdout
        for line in out.splitlines():
            if line.startswith("Model name:"):
                return line.split(":", 1)[1].strip()
    except (OSError, subprocess.CalledProcessError):
        pass
    return platform.processor() or "unknown"


def cpu_flags():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("flags"):
                    flags = set(line.split(":", 1)[1].split())
                    return [x for x in ("avx2", "avx512f", "avx512_vnni", "avx512_bf16") if x in flags]
    except OSError:
        pass
    return []


def dram_bandwidth(cache_dir, mib=256):
    """Single- and all-thread read GB/s, or None if no C++ compiler is around."""
    exe = os.path.join(cache_dir, "stream_probe")
    try:
        if not os.path.exists(exe) or os.path.getmtime(exe) < os.path.getmtime(PROBE_SRC):
            os.makedirs(cache_dir, exist_ok=True)
            subprocess.run(["g++", "-O3", "-march=native", "-pthread", PROBE_SRC, "-o", exe],
                           check=True, capture_output=True)
        out = subprocess.run([exe, str(mib), str(os.cpu_count() or 1)], capture_output=True,
                             text=True, check=True, timeout=120).stdout
        return json.loads(out)["read_gbps"]
    except (OSError, subprocess.SubprocessError, ValueError, KeyError):
        return None


def describe(cache_dir, probe=True):
    mem_gib = None
    try:
        mem_gib = round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30, 1)
    except (ValueError, OSError):
        pass
    return {"cpu": cpu_model(), "cores": os.cpu_count(), "simd": cpu_flags(), "mem_gib": mem_gib,
            "dram_read_gbps": dram_bandwidth(cache_dir) if probe else None,
            "loadavg_at_start": list(os.getloadavg()), "os": platform.platform()}
