#!/usr/bin/env bash
# trace/ladder.sh BIN OUTDIR [env...]: a fresh relay (BIN serve) on CPU 0 with
# GODEBUG=gctrace=1 and a pprof listener, petrel bench ladder on CPU 1;
# TRACE=seconds also saves a runtime trace of the run (OUTDIR/trace.out).
# RATES, HOLD, CONNS set the ladder; BENCH_ARGS adds flags to petrel bench
# (e.g. "--text natural"); DATA_ROOT the directory the fresh store
# goes under (default /tmp; /dev/shm takes the disk's fsync out of the path);
# WARMUP=RATE:HOLD first offers RATE events/s for HOLD to the fresh relay, a
# ladder of one step whose figures go to OUTDIR/warmup.txt and are not
# judged (its events are of another seed, so none is a duplicate of the
# ladder's; the measured ladder then starts on a relay past its first
# memtables' page faults). RESTART=1 starts the relay once on the fresh
# store, stops it once its write-ahead log spare is written (at most 20 s;
# store.wal_spares) and starts it again for the run (the store as after a
# restart: pebble's logs of the first start deleted, the spare kept). Used
# for issue 19 (docs/BENCHMARKS.md). OKTRACE=1 adds --oktrace on the relay's
# debug listener: the table's "tail: before/in/after" column.
set -u
BIN=$1; OUT=$2; shift 2
mkdir -p $OUT
PORT=${PORT:-7871}; PP=${PP:-7881}
DATA=$(mktemp -d ${DATA_ROOT:-/tmp}/petrel-ladder.XXXX)
RATES=${RATES:-100,300,500,1000,2000,3000,4000,5000,6000,8000}
HOLD=${HOLD:-5s}
if [ -n "${RESTART:-}" ]; then
	env "$@" taskset -c 0 $BIN serve --listen 127.0.0.1:$PORT --data $DATA/store >$OUT/serve-first.log 2>&1 &
	FPID=$!
	for i in $(seq 200); do
		ls $DATA/store/wal-spare-* 2>/dev/null | grep -qv '\.tmp$' && break
		sleep 0.1
	done
	kill $FPID; wait $FPID 2>/dev/null
fi
env GODEBUG=gctrace=1 PETREL_SERVER_PPROF_LISTEN=127.0.0.1:$PP "$@" taskset -c 0 $BIN serve --listen 127.0.0.1:$PORT --data $DATA/store >$OUT/serve.log 2>&1 &
RPID=$!
for i in $(seq 300); do curl -s -o /dev/null http://127.0.0.1:$PORT/stats && break; sleep 0.05; done
grep -q 'verifier=libsecp256k1' $OUT/serve.log || echo "NOT libsecp" >&2
if [ -n "${WARMUP:-}" ]; then
	taskset -c 1 $BIN bench ladder --seed 2 --rates ${WARMUP%%:*} --hold ${WARMUP##*:} --conns ${CONNS:-4} --url ws://127.0.0.1:$PORT --pid $RPID -q ${BENCH_ARGS:-} >$OUT/warmup.txt 2>&1
fi
if [ -n "${TRACE:-}" ]; then curl -s -o $OUT/trace.out "http://127.0.0.1:$PP/debug/pprof/trace?seconds=$TRACE" & TPID=$!; fi
OKT=""; [ -n "${OKTRACE:-}" ] && OKT="--oktrace http://127.0.0.1:$PP"
taskset -c 1 $BIN bench ladder --rates $RATES --hold $HOLD --conns ${CONNS:-4} --url ws://127.0.0.1:$PORT --pid $RPID -q $OKT ${BENCH_ARGS:-} >$OUT/ladder.txt 2>&1
[ -n "${TPID:-}" ] && wait $TPID
curl -s http://127.0.0.1:$PORT/stats > $OUT/stats.json
kill $RPID; wait $RPID 2>/dev/null
rm -rf $DATA
grep -E '^(step|knee|capacity)' $OUT/ladder.txt
