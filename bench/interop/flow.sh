#!/usr/bin/env bash
# One interop flow, by name: bench/interop/flow.sh NAME
#
# run.sh runs every flow this way, with SIPEDGE_BIN naming the sipedge it
# built and TMPDIR the suite's directory. The flow's last line is
# "RESULT PASS" or "RESULT FAIL reasons"; none means it could not run.
set -uo pipefail
. "$(dirname "$0")/../sipp/lib.sh"
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/flows.sh"

[ $# -eq 1 ] || { echo "usage: $0 FLOW" >&2; exit 2; }
fn=flow_${1//-/_}
declare -F "$fn" >/dev/null || { echo "$0: no flow $1 (run.sh -l lists them)" >&2; exit 2; }
flow_setup "$1"
"$fn"
verdict
