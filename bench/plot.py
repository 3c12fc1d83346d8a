#!/usr/bin/env python3
"""bench/plot.py OUTDIR: summarise bench/peers.sh's raw numbers.

Reads OUTDIR/peers.tsv (one line per timed run), OUTDIR/peers-brokered.tsv (brokered's RSS, store
bytes, audit summary per workload) and OUTDIR/peers-meta.tsv; prints the tables, writes them as
Markdown to OUTDIR/peers.md and draws OUTDIR/peers.png (matplotlib; gnuplot if matplotlib is
missing). Ratios are to native: the median of a runner's runs over the median of native's runs,
with the fastest and slowest run over the same native median in brackets.
"""
import csv
import os
import shutil
import statistics
import subprocess
import sys

ORDER = ["native", "brokered", "brokered-ro", "brokered-cow", "brokered-cow-user", "bwrap", "strace", "codex", "srt"]
LABEL = {
    "native": "native",
    "brokered": "brokered run",
    "brokered-ro": "brokered, readOnlyMounts",
    "brokered-cow": "brokered, copyOnWrite",
    "brokered-cow-user": "brokered, copyOnWrite, not root",
    "bwrap": "bubblewrap",
    "strace": "strace -f",
    "codex": "codex sandbox",
    "srt": "srt",
}


def read_tsv(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f, delimiter="\t"))


def mib(b):
    return float(b) / (1 << 20)


def human_bytes(b):
    b = float(b)
    for unit in ["B", "KiB", "MiB", "GiB"]:
        if abs(b) < 1024 or unit == "GiB":
            return f"{b:.0f} {unit}" if unit == "B" else f"{b:.1f} {unit}"
        b /= 1024
    return str(b)


def main():
    outdir = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "out")
    raw = read_tsv(os.path.join(outdir, "peers.tsv"))
    brk = {r["workload"]: r for r in read_tsv(os.path.join(outdir, "peers-brokered.tsv"))}
    meta = {}
    mpath = os.path.join(outdir, "peers-meta.tsv")
    if os.path.exists(mpath):
        with open(mpath) as f:
            for line in f:
                k, _, v = line.rstrip("\n").partition("\t")
                meta[k] = v

    workloads, runners = [], set()
    times, failed = {}, {}
    for r in raw:
        w, n = r["workload"], r["runner"]
        if w not in workloads:
            workloads.append(w)
        runners.add(n)
        times.setdefault((w, n), []).append(float(r["seconds"]))
        if r["status"] != "0":
            failed[(w, n)] = failed.get((w, n), 0) + 1
    runners = [n for n in ORDER if n in runners]

    stats = {}  # (w, n) -> (median ratio, min ratio, max ratio, median seconds)
    for w in workloads:
        base = statistics.median(times[(w, "native")])
        for n in runners:
            t = times.get((w, n))
            if not t:
                continue
            m = statistics.median(t)
            stats[(w, n)] = (m / base, min(t) / base, max(t) / base, m)

    lines = []
    p = lines.append
    p("# brokered against native and other sandboxes")
    p("")
    p(f"{meta.get('date', '')}, {meta.get('machine', '')}; runs per cell: {meta.get('runs', '?')}; "
      f"workload scale {meta.get('scale', '?')} (1 = full, `bench/peers.sh`; 0.25 = `-q`).")
    p("")
    p("Versions: " + "; ".join(f"{LABEL[n]}: {meta.get('version:' + n, '?')}" for n in runners) + ".")
    p("")
    p("## Time, as a ratio to native")
    p("")
    p("Median of the runs over native's median (fastest–slowest run in brackets); every run in a "
      "fresh copy of the workspace. `!` = some runs exited non-zero (see peers-errors.log).")
    p("")
    head = ["workload", "native (median)"] + [LABEL[n] for n in runners if n != "native"] + ["target (brokered)", "met", "< strace -f"]
    p("| " + " | ".join(head) + " |")
    p("|" + "---|" * len(head))
    verdicts = {}
    for w in workloads:
        nat = stats[(w, "native")][3]
        cells = [w, f"{nat * 1000:.1f} ms" if nat < 1 else f"{nat:.2f} s"]
        for n in runners:
            if n == "native":
                continue
            s = stats.get((w, n))
            if not s:
                cells.append("—")
                continue
            bang = "!" if failed.get((w, n)) else ""
            cells.append(f"{s[0]:.2f}× ({s[1]:.2f}–{s[2]:.2f}){bang}")
        target = (brk.get(w) or {}).get("target", "-")
        b = stats.get((w, "brokered"))
        met, vs_strace = "—", "—"
        if b and target and target != "-":
            ref, lim = target.split()
            lim = float(lim)
            if ref == "native":
                met = "yes" if b[0] <= lim else "**no**"
                target_s = f"≤ {lim:.2f}× native"
            else:
                rb = stats.get((w, ref))
                target_s = f"≤ {LABEL[ref]}" if lim == 1 else f"≤ {lim:.2f}× {LABEL[ref]}"
                met = ("yes" if b[3] <= lim * rb[3] else "**no**") if rb else "n/a"
        else:
            target_s = "—"
        if b and stats.get((w, "strace")):
            vs_strace = "yes" if b[3] < stats[(w, "strace")][3] else "**no**"
        verdicts[w] = (met, vs_strace)
        cells += [target_s, met, vs_strace]
        p("| " + " | ".join(cells) + " |")
    p("")
    p("## Wall time, medians")
    p("")
    head = ["workload"] + [LABEL[n] for n in runners]
    p("| " + " | ".join(head) + " |")
    p("|" + "---|" * len(head))
    for w in workloads:
        cells = [w]
        for n in runners:
            s = stats.get((w, n))
            cells.append("—" if not s else (f"{s[3] * 1000:.1f} ms" if s[3] < 1 else f"{s[3]:.3f} s"))
        p("| " + " | ".join(cells) + " |")
    p("")
    if brk:
        p("## brokered: supervisor peak RSS, store bytes, broker time from the audit log")
        p("")
        p("Peak RSS is VmHWM of the brokered process itself (the supervisor; the command is exec'd in "
          "a child and not counted), from one extra run. Store bytes: growth of $XDG_STATE_HOME/brokered "
          "(du -sb, fresh store, median of the timed runs). Broker time: sum of the audit log's `us=` "
          "(time inside the broker per operation) in that extra run, and its share of the run's wall time.")
        p("")
        p("| workload | what | peak RSS | ≤ 16 MiB | store bytes | audited ops | broker time (sum us=) | share of wall | median us/op | ops (count, sum us) |")
        p("|---|---|---|---|---|---|---|---|---|---|")
        for w in workloads:
            r = brk.get(w)
            if not r:
                continue
            rss = float(r["rss_kb"]) / 1024
            usum = float(r["audit_us_sum"]) / 1e6
            wall = float(r["probe_seconds"] or 0)
            share = f"{100 * usum / wall:.0f} %" if wall > 0 else "—"
            ops = r["audit_ops"]
            if ops and ops != "-":
                parts = sorted((x.split(":") for x in ops.split(",")), key=lambda x: -int(x[2]))
                ops = ", ".join(f"{o} {c} ({int(s) / 1000:.0f} ms)" for o, c, s in parts[:4])
            p(f"| {w} | {r['desc']} | {rss:.1f} MiB | {'yes' if rss <= 16 else '**no**'} | "
              f"{human_bytes(r['store_bytes'])} | {r['audit_lines']} | {usum:.3f} s | {share} | "
              f"{r['audit_us_median']} | {ops} |")
        p("")
    missed = [w for w, v in verdicts.items() if "**no**" in v]
    if missed:
        p("Missed targets: " + ", ".join(missed) + ".")
        p("")

    md = "\n".join(lines)
    with open(os.path.join(outdir, "peers.md"), "w") as f:
        f.write(md)
    print(md)

    png = os.path.join(outdir, "peers.png")
    title = f"brokered vs native and peers ({meta.get('machine', '').split(' at ')[0]}, scale {meta.get('scale', '?')})"
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        plt = None
    others = [n for n in runners if n != "native"]
    if plt:
        fig, ax = plt.subplots(figsize=(max(8, 1.5 * len(workloads)), 5.5))
        width = 0.8 / max(1, len(others))
        colors = {"brokered": "#d62728", "brokered-ro": "#ff9896", "brokered-cow": "#8c564b", "brokered-cow-user": "#c49c94", "bwrap": "#1f77b4", "strace": "#7f7f7f", "codex": "#2ca02c", "srt": "#9467bd"}
        for i, n in enumerate(others):
            xs, ys, lo, hi = [], [], [], []
            for j, w in enumerate(workloads):
                s = stats.get((w, n))
                if not s:
                    continue
                xs.append(j + (i - (len(others) - 1) / 2) * width)
                ys.append(s[0])
                lo.append(s[0] - s[1])
                hi.append(s[2] - s[0])
            ax.bar(xs, ys, width, label=LABEL[n], color=colors.get(n), yerr=[lo, hi], capsize=2, error_kw={"elinewidth": 0.8})
        for j, w in enumerate(workloads):
            target = (brk.get(w) or {}).get("target", "-")
            if target and target.startswith("native "):
                lim = float(target.split()[1])
                x0 = j + (0 - (len(others) - 1) / 2) * width
                ax.plot([x0 - width / 2, x0 + width / 2], [lim, lim], color="black", linewidth=2)
        ax.axhline(1.0, color="black", linewidth=0.8, linestyle="--")
        ax.set_yscale("log")
        ax.set_xticks(range(len(workloads)))
        ax.set_xticklabels(workloads)
        ax.set_ylabel("time / native time (median, log scale; bars: min–max)")
        ax.set_title(title + "\nblack tick: brokered's target")
        ax.legend(fontsize=8)
        ax.grid(axis="y", which="both", alpha=0.3)
        fig.tight_layout()
        fig.savefig(png, dpi=110)
        print(f"\nwrote {os.path.join(outdir, 'peers.md')} and {png}")
    elif shutil.which("gnuplot"):
        dat = os.path.join(outdir, "peers-plot.dat")
        with open(dat, "w") as f:
            f.write("workload " + " ".join(LABEL[n].replace(" ", "_") for n in others) + "\n")
            for w in workloads:
                f.write(w + " " + " ".join(f"{stats[(w, n)][0]:.4f}" if (w, n) in stats else "NaN" for n in others) + "\n")
        script = (f"set terminal png size 1100,550; set output '{png}'; set style data histogram; "
                  "set style histogram cluster gap 1; set style fill solid; set logscale y; "
                  f"set title '{title}'; set ylabel 'time / native (median)'; set key top left; "
                  f"plot for [i=2:{len(others) + 1}] '{dat}' using i:xtic(1) title columnheader(i)")
        subprocess.run(["gnuplot", "-e", script], check=False)
        print(f"\nwrote {os.path.join(outdir, 'peers.md')} and {png} (gnuplot)")
    else:
        print(f"\nwrote {os.path.join(outdir, 'peers.md')}; no chart: neither matplotlib nor gnuplot "
              "(bench/install-peers.sh installs python3-matplotlib)", file=sys.stderr)


if __name__ == "__main__":
    main()
