#!/usr/bin/env python3
"""Routing skew from a ROUTE_TRACE file: per layer, the expert-usage entropy (bits, against
log2(n_experts) for uniform use) and the share of routed tokens taken by the hottest 25% of
experts.   ROUTE_TRACE=t.txt coli perplexity -m M -f F ; python3 tools/route_stats.py t.txt E"""
import collections
import math
import sys


def main():
    path, n_exp = sys.argv[1], int(sys.argv[2])
    use = collections.defaultdict(collections.Counter)
    for line in open(path):
        if line.startswith("#"):
            continue
        f = line.split()
        for ew in f[2:]:
            use[int(f[1])][int(ew.split(":")[0])] += 1
    print(f"{'layer':>5} {'entropy bits':>13} {'uniform':>8} {'top-25% share':>14} {'unused':>7}")
    for layer in sorted(use):
        c = use[layer]
        tot = sum(c.values())
        p = [c[e] / tot for e in range(n_exp)]
        h = -sum(x * math.log2(x) for x in p if x > 0)
        top = sorted(p, reverse=True)[: max(1, n_exp // 4)]
        print(f"{layer:>5} {h:>13.3f} {math.log2(n_exp):>8.3f} {sum(top):>14.1%} "
              f"{sum(1 for x in p if x == 0):>7}")


if __name__ == "__main__":
    main()
