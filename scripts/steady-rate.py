#!/usr/bin/env python3
"""Whole-run and steady-state throughput of bench runs, from their TIMELINE logs.

    scripts/steady-rate.py RUN.timeline [RUN.timeline ...]

`splitprover bench` reports s/proof over a run's whole span (first SYNTH_START to last
PROOF_DONE), so a short run also pays the pipeline's fill (no GPU work until the first
synthesis ends) and drain. The steady rate here is taken between the completions at one
quarter and three quarters of the run: (t[3n/4] - t[n/4]) / (3n/4 - n/4) over the sorted
PROOF_DONE times. Runs with fewer than 8 proofs print `-`.
"""
import sys


def rates(path):
    done, starts = [], []
    with open(path) as f:
        for line in f:
            parts = line.split()
            if len(parts) < 2 or parts[0] != "TIMELINE":
                continue
            fields = dict(p.split("=", 1) for p in parts[2:] if "=" in p)
            t = int(fields.get("t_ns", "0"))
            if parts[1] == "PROOF_DONE":
                done.append(t)
            elif parts[1] == "SYNTH_START":
                starts.append(t)
    done.sort()
    n = len(done)
    if n == 0:
        return n, None, None
    first = min(starts) if starts else done[0]
    whole = (done[-1] - first) / 1e9 / n
    if n < 8:
        return n, whole, None
    lo, hi = n // 4, (3 * n) // 4
    steady = (done[hi] - done[lo]) / 1e9 / (hi - lo)
    return n, whole, steady


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    print("| run | proofs | s/proof (whole run) | s/proof (steady, middle half) |")
    print("|---|---|---|---|")
    for path in sys.argv[1:]:
        try:
            n, whole, steady = rates(path)
        except (OSError, ValueError) as e:
            sys.exit(f"{path}: {e}")
        fmt = lambda x: "-" if x is None else f"{x:.4f}"
        print(f"| {path.rsplit('/', 1)[-1]} | {n} | {fmt(whole)} | {fmt(steady)} |")


if __name__ == "__main__":
    main()
