#!/usr/bin/env bash
# Runs tests/dist/dist_fail MODE under mpirun with 2 processes: every process must fail (the job's
# status is not 0), each must print what failed (the patterns below, process by process), and the
# whole must end well before the timeout (a hang is status 124).
#
#   fail_test.sh MPIRUN... -- DIST_FAIL MODE [BACKEND]   (no MPIRUN: one process, mode local)
set -uo pipefail
mpirun=()
while [[ $1 != -- ]]; do mpirun+=("$1"); shift; done
shift
program=$1 mode=$2 backend=${3:-host}
if [[ ${#mpirun[@]} -gt 0 ]]; then
  out=$(timeout 60 "${mpirun[@]}" -np 2 "$program" "$mode" "$backend" 2>&1)
else
  out=$(timeout 60 "$program" "$mode" "$backend" 2>&1)
fi
status=$?
echo "$out"
fail() { echo "fail_test ($mode): $*" >&2; exit 1; }
[[ $status -eq 124 ]] && fail "hung: no end within 60 s"
[[ $status -eq 0 ]] && fail "the job succeeded"
expect() { grep -Eq "$1" <<<"$out" || fail "no line matching '$1'"; }
case $mode in
  throw)
    expect "process 1 failed: process 1 gave up before its allreduce"
    expect "process 0 failed: .*process 1 failed: process 1 gave up" ;;
  count)
    expect "process 0 failed: .*called it with count 5 and (process|rank) 0 with 4"
    expect "process 1 failed: .*called it with count 5 and (process|rank) 0 with 4" ;;
  vector)
    expect "process 0 failed: .*process 1 asked for 101 rows and process 0 for 100"
    expect "process 1 failed: .*process 1 asked for 101 rows and process 0 for 100" ;;
  exchange)
    expect "process 1 failed: .*process 0 sent more than the 3 elements process 1 expected"
    expect "process 0 failed: .*process 0 sent more than the 3 elements process 1 expected" ;;
  peer)
    expect "process 1 failed: process 1 gave up before its peer gather"
    expect "process 0 failed: .*process 1 failed: process 1 gave up before its peer gather" ;;
  peer_timeout)
    # Process 1 stands for a rank that hangs: it is still asleep when process 0 fails, and
    # mpirun ends it then, so only process 0 can say why.
    expect "process 0 failed: .*rank 0 waited .* for rank 1's partial sums" ;;
  exchange_peer)
    expect "process 1 failed: process 1 gave up before its peer exchange"
    expect "process 0 failed: .*process 1 failed: process 1 gave up before its peer exchange" ;;
  exchange_timeout)
    # As peer_timeout: process 1 is still asleep when process 0 fails.
    expect "process 0 failed: .*rank 0 waited .* in a peer exchange for rank 1's messages" ;;
  local)
    expect "rank 0 failed: .*rank 1 called allreduce of 5 elements where rank 0 called allreduce of 4"
    expect "rank 1 failed: .*rank 1 called allreduce of 5 elements where rank 0 called allreduce of 4" ;;
  *) fail "unknown mode" ;;
esac
echo "fail_test ($mode): every process failed with its reason (status $status)"
