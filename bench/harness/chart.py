"""PNG chart of the headline figures: python chart.py results.json out.png (needs matplotlib;
run by the harness with whichever interpreter has it)."""
import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

PANELS = [("single", ("decode_tok_s",), "decode tok/s (single stream)"),
          ("single", ("prefill_tok_s",), "prefill tok/s (single stream)"),
          ("concurrency", None, "aggregate tok/s (max concurrency)"),
          ("agent", ("total_s",), "agent loop total s (lower is better)")]


def value(cfg, wl, path):
    v = (cfg.get("workloads") or {}).get(wl)
    if wl == "concurrency" and isinstance(v, dict):
        levels = [k for k in v if k.isdigit()]
        v = v[max(levels, key=int)] if levels else None
    if wl == "concurrency":
        path = ("aggregate_tok_s",)
    for k in path:
        v = v.get(k) if isinstance(v, dict) else None
    return v if isinstance(v, (int, float)) else 0.0


def main(src, dst):
    res = json.load(open(src))
    models = [m for m in res["models"] if any(c["model"] == m for c in res["configs"])]
    fig, axes = plt.subplots(len(models), len(PANELS), figsize=(4.2 * len(PANELS), 3.4 * len(models)),
                             squeeze=False)
    for row, model in enumerate(models):
        cfgs = [c for c in res["configs"] if c["model"] == model]
        names = [f"{c['engine']}\n{c['format']}" for c in cfgs]
        colors = ["tab:red" if c["engine"] == "rapid-mlx" else "tab:gray" for c in cfgs]
        for col, (wl, path, title) in enumerate(PANELS):
            ax = axes[row][col]
            ax.bar(range(len(cfgs)), [value(c, wl, path) for c in cfgs], color=colors)
            ax.set_xticks(range(len(cfgs)), names, fontsize=7)
            ax.set_title(f"{model}: {title}", fontsize=8)
    m = res["machine"]
    fig.suptitle(f"{m.get('cpu')}, {m.get('cores')} cores — {res['preset']} run {res['started']}", fontsize=9)
    fig.tight_layout()
    fig.savefig(dst, dpi=110)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
