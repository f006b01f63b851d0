#!/usr/bin/env python3
"""Other load in bursts, to see what tuning does beside it: one busy thread for --on
seconds every --period seconds, until killed (docs/tuning.md, "Windows taken again").

    python3 scripts/disturb.py --on 3 --period 12 & tgc tune ...; kill %1
"""

import argparse
import time


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--on", type=float, default=3.0, help="seconds busy per period")
    p.add_argument("--period", type=float, default=12.0, help="seconds from one burst to the next")
    a = p.parse_args()
    if not 0 < a.on <= a.period:
        p.error(f"--on must be in (0, --period], got --on {a.on} --period {a.period}")
    while True:
        t0 = time.monotonic()
        while time.monotonic() - t0 < a.on:
            pass
        time.sleep(a.period - a.on)


if __name__ == "__main__":
    main()
