#!/usr/bin/env bash
# trace/steps.sh BIN OUTDIR RATE N [env...]: one relay (BIN serve, debug log,
# on CPU 0, a fresh store) and N one-step ladders of HOLD (default 10s) at
# RATE on CPU 1, one after another, each with its own seed (no duplicates);
# perf records the machine's process starts meanwhile. stepwork.py then
# prints each step's OK p99 beside the memtable flushes and compactions the
# relay logged in it and the programs started in it: how much of a step's
# tail goes with the store's background work, and how much with other
# processes (issue 19, docs/BENCHMARKS.md, thirty-second sitting).
set -u
BIN=$1; OUT=$2; RATE=$3; N=$4; shift 4
mkdir -p $OUT; rm -f $OUT/steps.txt
PORT=${PORT:-7873}
DATA=$(mktemp -d ${DATA_ROOT:-/tmp}/petrel-steps.XXXX)
env "$@" taskset -c 0 $BIN serve --log-level debug --listen 127.0.0.1:$PORT --data $DATA/store >$OUT/serve.log 2>&1 &
RPID=$!
for i in $(seq 300); do curl -s -o /dev/null http://127.0.0.1:$PORT/stats && break; sleep 0.05; done
PERFPID=""
if command -v perf >/dev/null; then
	perf record -k mono -e sched:sched_process_exec -a -o $OUT/exec.data -- sleep 100000 >/dev/null 2>&1 &
	PERFPID=$!
fi
for i in $(seq $N); do
	s=$EPOCHREALTIME
	taskset -c 1 $BIN bench ladder --seed $((100 + i)) --rates $RATE --hold ${HOLD:-10s} --conns ${CONNS:-4} \
		--url ws://127.0.0.1:$PORT --pid $RPID -q --json ${BENCH_ARGS:---text natural} >$OUT/step$i.json 2>/dev/null
	echo "$i $s $EPOCHREALTIME" >>$OUT/steps.txt
done
if [ -n "$PERFPID" ]; then
	kill -INT $PERFPID; wait $PERFPID 2>/dev/null
	perf script -i $OUT/exec.data -F time,trace >$OUT/exec.txt 2>/dev/null
fi
kill $RPID; wait $RPID 2>/dev/null
rm -rf $DATA
python3 $(dirname $0)/stepwork.py $OUT
