"""One `rapid-mlx run` and the figures on its last stderr line, for bench/memory.py and
bench/core_table.py. Standard library only."""
import re
import subprocess

LAST_LINE = re.compile(r"prompt (\d+) tokens: prefill ([\d.]+) tok/s \| (\d+) tokens generated: "
                       r"decode ([\d.]+) tok/s.*?\| peak RSS ([\d.]+) MB")


def run(binary, model, *args):
    """{prompt, generated, prefill, decode, peak_rss_bytes} of `binary run --model model *args`.
    The peak is the process's own VmHWM as `run` reports it: the whole process from its exec on,
    shared libraries included (a parent's ru_maxrss of a child would also count the process it
    was forked from)."""
    cmd = [binary, "run", "--model", model, *map(str, args)]
    r = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, errors="replace")
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} exited with {r.returncode}:\n{r.stderr[-2000:]}")
    m = None
    for m in LAST_LINE.finditer(r.stderr):
        pass
    if not m:
        raise RuntimeError(f"no speed line in the output of {' '.join(cmd)}:\n{r.stderr[-2000:]}")
    return {"prompt": int(m.group(1)), "prefill": float(m.group(2)), "generated": int(m.group(3)),
            "decode": float(m.group(4)), "peak_rss_bytes": round(float(m.group(5)) * 1e6)}
