"""One tick of a collision world: ellipsoid bodies on a cratered terrain, seen from above.
Bodies touching the ground are outlined in black, those overlapping another body in
orange; dots mark the contact points (sized by depth), lines join the bodies of each pair.

    python examples/collision_contacts.py [--bodies 250] [--device cpu]

Saves collision_contacts.png (or --out PATH).
"""

import argparse

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
from matplotlib.patches import Ellipse

import nearkit


def crater_heights(size):
    """A crater with a raised rim over gentle waves (as the command's crater scene)."""
    y, x = np.mgrid[0 : size + 1, 0 : size + 1].astype(np.float64)
    r = np.hypot(x - size / 2, y - size / 2) / (size / 4)
    bowl = np.where(r < 1, -4 * (1 - r * r), 0)
    rim = 1.5 * np.exp(-(((r - 1) * 6) ** 2))
    return bowl + rim + 0.3 * np.sin(x / 3) * np.cos(y / 4)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bodies", type=int, default=250)
    ap.add_argument("--device", default="auto")
    ap.add_argument("--out", default="collision_contacts.png")
    args = ap.parse_args()

    size = 60
    heights = crater_heights(size)
    world = nearkit.World(cell_size=1.0)
    world.set_heightfield(heights, spacing=1.0)

    # Bodies near the surface: some resting in it, some just above, some overlapping.
    rng = np.random.default_rng(3)
    n = args.bodies
    xy = rng.uniform(2, size - 2, (n, 2))
    ground = heights[np.round(xy[:, 1]).astype(int), np.round(xy[:, 0]).astype(int)]
    radii = rng.uniform(0.3, 1.2, (n, 3))
    angle = rng.uniform(0, np.pi, n)  # turned about the vertical axis
    q = np.column_stack([np.zeros(n), np.zeros(n), np.sin(angle / 2), np.cos(angle / 2)])
    centers = np.column_stack([xy, ground + radii[:, 2] * rng.uniform(0.6, 1.6, n)])
    world.add_bodies(centers, radii, q)

    collider = nearkit.Collider(device=args.device)
    c = collider.contacts(world)
    on_ground = c[c["kind"] == nearkit.CONTACT_HEIGHTFIELD]
    pairs = c[c["kind"] == nearkit.CONTACT_BODY]

    fig, ax = plt.subplots(figsize=(8, 7))
    im = ax.imshow(heights, origin="lower", cmap="terrain", extent=[0, size, 0, size])
    fig.colorbar(im, label="terrain height (m)")
    touching, paired = set(on_ground["body"].tolist()), set(pairs["body"].tolist()) | set(pairs["other"].tolist())
    for i in range(n):
        edge = "darkorange" if i in paired else ("k" if i in touching else "0.5")
        ax.add_patch(Ellipse(xy[i], 2 * radii[i, 0], 2 * radii[i, 1], angle=np.degrees(angle[i]),
                             fc=(1, 1, 1, 0.35), ec=edge, lw=1.2 if edge != "0.5" else 0.6))
    for body, other in zip(pairs["body"], pairs["other"]):
        ax.plot(*zip(xy[body], xy[other]), c="darkorange", lw=1.5)
    ax.scatter(on_ground["point"][:, 0], on_ground["point"][:, 1], s=4 + 60 * on_ground["depth"],
               c="k", label=f"{len(on_ground):,} body–triangle contacts")
    ax.scatter(pairs["point"][:, 0], pairs["point"][:, 1], s=6 + 30 * pairs["depth"], c="red",
               label=f"{len(pairs):,} body–body contacts")
    ax.set_xlim(0, size)
    ax.set_ylim(0, size)
    ax.set_title(f"One tick: {n} ellipsoids on {world.heightfield_triangle_count:,} triangles ({collider.describe()})")
    ax.legend(loc="lower right", fontsize=8)
    fig.tight_layout()
    fig.savefig(args.out, dpi=120)
    print(f"saved {args.out}")


if __name__ == "__main__":
    main()
