#!/usr/bin/env python3
"""The scaling model of docs/scaling.md: bytes a fit over R ranks exchanges per iteration against
one GPU's measured compute, printed as the page's markdown table.

  scripts/scaling_model.py [--rounds R]

--rounds: histogram rounds per trimmed anchor in a hot iteration's kept selection (each anchor
leaves the exchanges once its threshold is settled; 2.5 is what a fit of Fashion-MNIST and of a
Gaussian mixture over 2 ranks measured, at most 12).
"""
import argparse

SETS = [  # name, n, d, m, one GPU's seconds per iteration
    ("(b) 1M x 128, m = 4,096", 1_000_000, 128, 4096, 0.00443),
    ("(d) 1M x 768, m = 16,384", 1_000_000, 768, 16384, 0.0646),
    ("1B x 128, m = 65,536", 1_000_000_000, 128, 65536, 258.0),
]
# ranks, label, link bytes/s, latency per exchange
LAYOUTS = [(1, "1 GPU", None, 0.0)] + [(g, f"{g} GPUs, one host", 400e9, 20e-6) for g in (2, 4, 8)] + \
          [(8 * h, f"{h} hosts x 8", 50e9, 30e-6) for h in (2, 8, 64)]
HOT_EXCHANGES, COLD_EXCHANGES = 16, 4


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=float, default=2.5)
    rounds = parser.parse_args().rounds
    print("| set | hot MB / iteration (sums, selection) | cold MB / iteration | ranks | compute s "
          "| exchange s, hot | exchange s, cold | efficiency hot / cold |")
    print("|---|---|---|---|---|---|---|---|")
    for name, n, d, m, t1 in SETS:
        sums = 8 * (m * d + m)
        selection = rounds * 256 * 8 * m
        rest = 16 * m + 8 * n / 1024 + 8
        hot, cold = sums + selection + rest, sums + rest
        for r, label, bandwidth, latency in LAYOUTS:
            compute = t1 / r
            if r == 1:
                exchange_hot = exchange_cold = 0.0
            else:
                share = 2 * (r - 1) / r
                exchange_hot = hot * share / bandwidth + HOT_EXCHANGES * latency
                exchange_cold = cold * share / bandwidth + COLD_EXCHANGES * latency
            first = r == 1
            print(f"| {name if first else ''} | {f'{hot / 1e6:.1f} ({sums / 1e6:.1f}, {selection / 1e6:.0f})' if first else ''} "
                  f"| {f'{cold / 1e6:.1f}' if first else ''} | {label} | {compute:.3g} | {exchange_hot:.2g} "
                  f"| {exchange_cold:.2g} | {compute / (compute + exchange_hot):.2f} / "
                  f"{compute / (compute + exchange_cold):.2f} |")


if __name__ == "__main__":
    main()
