#!/usr/bin/env python3
"""What a SIPp carrier saw of each call's BYE, for the fault campaign.

    byetrace.py MESSAGE_LOG [--before EPOCH]

Reads a SIPp message trace (-trace_msg) and, per Call-ID that received a
BYE, counts the BYEs received (the first and its retransmissions: SIPp
logs every datagram) and whether a 200 to the BYE was sent before EPOCH
(Unix seconds: when sipedge exited; default: ever). Prints

    calls=N retransmitted=N answered=N

calls: Call-IDs with a BYE; retransmitted: those with two BYEs or more;
answered: those whose 200 to BYE went out before EPOCH and after a
retransmission (so that sipedge, still running, could take it).
"""

import argparse
import datetime
import re

ENTRY = re.compile(r"^-{20,} (\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)?)\s*$")
DIRECTION = re.compile(r"^(UDP|TCP) message (sent|received)")


def entries(path):
    """Yields (epoch, direction, message lines) per logged message."""
    when = None
    direction = None
    lines = []
    with open(path, errors="replace") as f:
        for raw in f:
            line = raw.rstrip("\r\n")
            m = ENTRY.match(line)
            if m:
                if when is not None and direction:
                    yield when, direction, lines
                when = datetime.datetime.fromisoformat(m.group(1)).timestamp()
                direction, lines = None, []
                continue
            d = DIRECTION.match(line)
            if d and direction is None:
                direction = d.group(2)
                continue
            lines.append(line)
    if when is not None and direction:
        yield when, direction, lines


def header(lines, name):
    for line in lines:
        if line.lower().startswith(name.lower() + ":"):
            return line.split(":", 1)[1].strip()
    return ""


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("log")
    ap.add_argument("--before", type=float, default=None)
    a = ap.parse_args()
    byes = {}      # Call-ID -> [times of the BYEs received]
    answered = {}  # Call-ID -> time of the first 200 to BYE sent
    for when, direction, lines in entries(a.log):
        body = [l for l in lines if l.strip()]
        if not body:
            continue
        start = body[0]
        cid = header(body, "Call-ID") or header(body, "i")
        cseq = header(body, "CSeq")
        if direction == "received" and start.startswith("BYE "):
            byes.setdefault(cid, []).append(when)
        elif direction == "sent" and start.startswith("SIP/2.0 200") and cseq.endswith("BYE"):
            answered.setdefault(cid, when)
    retrans = sum(1 for t in byes.values() if len(t) >= 2)
    ok = 0
    for cid, t in byes.items():
        at = answered.get(cid)
        if at is None or len(t) < 2 or at < t[1]:
            continue
        if a.before is None or at < a.before:
            ok += 1
    print("calls=%d retransmitted=%d answered=%d" % (len(byes), retrans, ok))


if __name__ == "__main__":
    main()
