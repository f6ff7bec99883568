"""Markdown report from the raw results: the machine header, then per model one table with every
figure for every engine/format, the best peer, and rapid-mlx's advantage over it."""

# (label, workload, path into its result, higher is better, scale, format)
def metric_rows(levels):
    rows = [
        ("single: prefill tok/s", "single", ("prefill_tok_s",), True, 1, "{:.0f}"),
        ("single: decode tok/s", "single", ("decode_tok_s",), True, 1, "{:.1f}"),
        ("single: TTFT ms", "single", ("ttft_s",), False, 1000, "{:.0f}"),
    ]
    for n in levels:
        rows += [
            (f"conc {n}: aggregate tok/s", "concurrency", (str(n), "aggregate_tok_s"), True, 1, "{:.1f}"),
            (f"conc {n}: TTFT p50 ms", "concurrency", (str(n), "ttft_p50_s"), False, 1000, "{:.0f}"),
            (f"conc {n}: TTFT p99 ms", "concurrency", (str(n), "ttft_p99_s"), False, 1000, "{:.0f}"),
            (f"conc {n}: ITL p50 ms", "concurrency", (str(n), "itl_p50_s"), False, 1000, "{:.1f}"),
            (f"conc {n}: ITL p99 ms", "concurrency", (str(n), "itl_p99_s"), False, 1000, "{:.1f}"),
        ]
    rows += [
        ("agent: total s", "agent", ("total_s",), False, 1, "{:.2f}"),
        ("agent: TTFT turn 1 ms", "agent", ("ttft_first_s",), False, 1000, "{:.0f}"),
        ("agent: TTFT later turns ms", "agent", ("ttft_mean_later_s",), False, 1000, "{:.0f}"),
        ("code edit: total s", "code_edit", ("total_s",), False, 1, "{:.2f}"),
        ("code edit: decode tok/s", "code_edit", ("decode_tok_s",), True, 1, "{:.1f}"),
        ("restart: start-up s", "restart", ("startup_s",), False, 1, "{:.2f}"),
        ("restart: TTFT warm ms", "restart", ("ttft_warm_s",), False, 1000, "{:.0f}"),
        ("restart: TTFT after restart ms", "restart", ("ttft_after_restart_s",), False, 1000, "{:.0f}"),
    ]
    return rows


def _get(cfg, workload, path):
    v = (cfg.get("workloads") or {}).get(workload)
    for k in path:
        if not isinstance(v, dict) or v.get("completion_tokens") == 0:
            return None  # a level where every stream failed has no figures, not zero ones
        v = v.get(k)
    return v if isinstance(v, (int, float)) else None


def label(cfg):
    return f"{cfg['engine']} {cfg['format']}" + ("*" if cfg.get("reused_from") else "")


def machine_header(m):
    bw = m.get("dram_read_gbps") or {}
    bw_s = ", ".join(f"{k} thread{'s' if k != '1' else ''} {v:.1f} GB/s" for k, v in bw.items()) or "not measured"
    load = m.get("loadavg_at_start") or []
    return [f"**Machine:** {m.get('cpu')}, {m.get('cores')} cores ({' '.join(m.get('simd') or [])}), "
            f"{m.get('mem_gib')} GiB; DRAM read bandwidth: {bw_s}; "
            f"load average at start {' / '.join(f'{x:.1f}' for x in load)}"]


def ratio(rapid, peer, higher):
    if rapid is None or peer is None or rapid <= 0 or peer <= 0:
        return None
    return rapid / peer if higher else peer / rapid


def best(vals, higher):
    vals = [v for v in vals if v is not None]
    if not vals:
        return None
    return max(vals) if higher else min(vals)


def markdown(results):
    P = results["params"]
    out = [f"# rapid-mlx benchmark ({results['preset']}, {results['started']})", ""]
    out += machine_header(results["machine"]) + [""]
    out.append("Ratio = rapid-mlx's best format vs the best peer on that row, oriented so that "
               "**> 1 means rapid-mlx is better** (faster or lower latency). Same OpenAI client, "
               "temperature 0, one server at a time.")
    out.append("")
    for model in results["models"]:
        cfgs = [c for c in results["configs"] if c["model"] == model]
        if not cfgs:
            continue
        out += [f"## {model}", ""]
        failed = [c for c in cfgs if c.get("error")]
        cols = cfgs
        out.append("| figure | " + " | ".join(label(c) for c in cols) + " | best peer | ratio |")
        out.append("|---" * (len(cols) + 3) + "|")
        for name, wl, path, higher, scale, fmt in metric_rows(P["levels"]):
            vals = [_get(c, wl, path) for c in cols]
            if all(v is None for v in vals):
                continue
            cells = [fmt.format(v * scale) if v is not None else "—" for v in vals]
            rapid = best([v for c, v in zip(cols, vals) if c["engine"] == "rapid-mlx"], higher)
            peer = best([v for c, v in zip(cols, vals) if c["engine"] != "rapid-mlx"], higher)
            r = ratio(rapid, peer, higher)
            out.append(f"| {name} | " + " | ".join(cells) +
                       f" | {fmt.format(peer * scale) if peer is not None else '—'}"
                       f" | {f'{r:.2f}×' if r is not None else '—'} |")
        out.append("")
        for c in failed:
            out.append(f"- {label(c)}: **failed**: {c['error']}")
        for c in cfgs:
            for wl, v in (c.get("workloads") or {}).items():
                if isinstance(v, dict) and v.get("error"):
                    out.append(f"- {label(c)} / {wl}: **failed**: {v['error']}")
                if wl == "concurrency" and isinstance(v, dict):
                    for n, lv in v.items():
                        if isinstance(lv, dict) and lv.get("errors"):
                            out.append(f"- {label(c)} / concurrency {n}: {len(lv['errors'])} of {n} "
                                       f"streams failed: {lv['errors'][0]}")
        out.append("")
    out.append("Workload sizes: " + ", ".join(f"{k}={v}" for k, v in P.items()))
    for note in results.get("notes", []):
        out.append(f"- {note}")
    return "\n".join(out) + "\n"
