#!/usr/bin/env python3
"""Count sipedge's CDRs by one field, for the fault campaign (bench/chaos).

    cdrcount.py CDR_FILE FIELD [--after EPOCH] [--before EPOCH]

Prints "VALUE COUNT" per distinct value of FIELD (route_source,
carrier_id, final_code, ...; an absent or empty field counts as "-"),
over the CDRs whose time_invite is in [--after, --before) (Unix seconds,
decimals allowed; default: all). A line that is not JSON counts as
"torn". FIELD "attempt" counts the failed attempts of lcr_attempts
instead, as CARRIER/STATUS/dialed or CARRIER/STATUS/undialed.
"""

import argparse
import collections
import datetime
import json


def epoch(ts):
    # "2026-12-05T00:08:55.808Z"
    return datetime.datetime.fromisoformat(ts.replace("Z", "+00:00")).timestamp()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("file")
    ap.add_argument("field")
    ap.add_argument("--after", type=float, default=None)
    ap.add_argument("--before", type=float, default=None)
    a = ap.parse_args()
    counts = collections.Counter()
    try:
        lines = open(a.file, "rb").readlines()
    except FileNotFoundError:
        lines = []
    for line in lines:
        try:
            rec = json.loads(line)
        except ValueError:
            counts["torn"] += 1
            continue
        t = epoch(rec.get("time_invite") or "1970-01-01T00:00:00Z")
        if a.after is not None and t < a.after:
            continue
        if a.before is not None and t >= a.before:
            continue
        if a.field == "attempt":
            for at in rec.get("lcr_attempts") or []:
                d = "dialed" if at.get("dialed") else "undialed"
                counts["%s/%s/%s" % (at.get("carrier_id"), at.get("status"), d)] += 1
            continue
        v = rec.get(a.field)
        counts["-" if v in (None, "") else str(v)] += 1
    for v, n in sorted(counts.items()):
        print(v, n)


if __name__ == "__main__":
    main()
