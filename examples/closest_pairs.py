"""The closest pairs of two point clouds: two armies on a plain, and the 40 closest
enemy pairs (each soldier of A with its nearest of B, then the 40 closest of those).

    python examples/closest_pairs.py [--k 40] [--mode nearest-per-a|all-pairs]

Saves closest_pairs.png (or --out PATH).
"""

import argparse

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np

import nearkit


def army(rng, n, centres, spread):
    """n soldiers in companies around the centres, on the ground (z = 0)."""
    c = np.asarray(centres, dtype=np.float64)
    p = c[rng.integers(0, len(c), n)] + rng.normal(0, spread, (n, 2))
    return np.column_stack([p, np.zeros(n)])


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--k", type=int, default=40)
    ap.add_argument("--mode", default="nearest-per-a", choices=["nearest-per-a", "all-pairs"])
    ap.add_argument("--out", default="closest_pairs.png")
    args = ap.parse_args()

    rng = np.random.default_rng(7)
    a = army(rng, 3000, [[20, 30], [35, 65], [30, 90]], 6.0)
    b = army(rng, 3000, [[70, 25], [55, 60], [75, 85]], 6.0)
    pairs = nearkit.closest_pairs(a, b, k=args.k, mode=args.mode)

    # Left: both armies, the pairs' area boxed; right: that area, the pairs joined.
    fig, (whole, zoom) = plt.subplots(1, 2, figsize=(13, 6.5))
    ends = np.concatenate([a[pairs.a, :2], b[pairs.b, :2]])
    lo, hi = ends.min(0) - 1.5, ends.max(0) + 1.5
    for ax in (whole, zoom):
        ax.scatter(a[:, 0], a[:, 1], s=2 if ax is whole else 8, c="tab:blue", label=f"army A ({len(a):,})")
        ax.scatter(b[:, 0], b[:, 1], s=2 if ax is whole else 8, c="tab:red", label=f"army B ({len(b):,})")
        ax.set_aspect("equal")
    whole.add_patch(plt.Rectangle(lo, *(hi - lo), fill=False, ec="k", lw=1.5))
    whole.set_title("two armies of 3,000 (the box: right)")
    whole.legend(loc="lower right")
    for ia, ib in zip(pairs.a, pairs.b):
        zoom.plot([a[ia, 0], b[ib, 0]], [a[ia, 1], b[ib, 1]], c="k", lw=1.5, zorder=3)
    zoom.scatter(a[pairs.a, 0], a[pairs.a, 1], s=30, c="tab:blue", edgecolors="k", zorder=4)
    zoom.scatter(b[pairs.b, 0], b[pairs.b, 1], s=30, c="tab:red", edgecolors="k", zorder=4)
    zoom.set_xlim(lo[0], hi[0])
    zoom.set_ylim(lo[1], hi[1])
    zoom.set_title(f"the {len(pairs.a)} closest pairs ({args.mode}), "
                   f"{pairs.distance[0]:.2f} to {pairs.distance[-1]:.2f} apart")
    fig.tight_layout()
    fig.savefig(args.out, dpi=120)
    print(f"saved {args.out}")


if __name__ == "__main__":
    main()
