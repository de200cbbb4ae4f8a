#!/usr/bin/env bash
# One fault of the campaign, by name: bench/chaos/fault.sh NAME
#
# run.sh runs every fault this way, with SIPEDGE_BIN naming the sipedge it
# built and TMPDIR the campaign's directory; alone, it builds sipedge
# itself. The fault's last lines are its NOTEs and
# "RESULT OFFERED ANSWERED FAILED CDRS PANICS PASS|FAIL [reasons]"; none
# means it could not run.
set -uo pipefail
. "$(dirname "$0")/../sipp/lib.sh"
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/faults.sh"

[ $# -eq 1 ] || { echo "usage: $0 FAULT" >&2; exit 2; }
fn=fault_${1//-/_}
declare -F "$fn" >/dev/null || { echo "$0: no fault $1 (run.sh -l lists them)" >&2; exit 2; }
chaos_setup "$1"
"$fn"
verdict
