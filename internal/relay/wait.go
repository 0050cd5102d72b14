package relay

import (
	"sync/atomic"
	"time"
)

// waitValve is the relay's time valve on EVENT admission
// (Config.MaxEventWait): it refuses new EVENTs while those already
// admitted wait longer than the bound for their OK, whatever their
// number. The count valves (VerifyQueue, MaxInflightEvents,
// MaxPendingEvents) trip on a number of events, so they refuse as soon as
// a burst or a short stall (a memtable flush, a slow fsync, a collection)
// fills them, even while the relay has the capacity to catch up within a
// fraction of a second; and at a higher per-event cost (search, larger
// events, a slower machine) the same count stands for a longer wait. The
// valve measures the wait itself, from two lower bounds, each cheap to
// keep:
//
//   - the sojourn: how long the most recently answered EVENT waited from
//     its read to its OK;
//   - the stall: how long ago that answer was (every EVENT in flight
//     then has waited at least that long now, and nothing was answered
//     since).
//
// Both count only while the answer left other EVENTs in flight: an
// answer that empties the pipeline shows there is no standing wait, so
// an old sojourn does not refuse the next burst of a quiet relay.
//
// A burst or a stall shorter than the bound passes without a refusal;
// when the relay is out of capacity the sojourn grows past the bound and
// new EVENTs are refused until an admitted one is answered within it, so
// the OK latency under overload stays about the bound. The count valves
// stay as bounds on memory, sized to hold the bound's worth of events.
// Safe for concurrent use.
type waitValve struct {
	max     time.Duration // <= 0: off
	sojourn atomic.Int64  // ns: the last answered EVENT's wait; 0 if it left none in flight
	stalled atomic.Int64  // unix ns of the last answer; 0 if it left none in flight
	failure atomic.Int64  // unix ns of the last store error's answer (failed)
}

// answered records an EVENT answered at now that was read at t0;
// inflight is the number of EVENTs still in flight after it.
func (v *waitValve) answered(t0, now time.Time, inflight int64) {
	if v.max <= 0 {
		return
	}
	if t0.UnixNano() <= v.failure.Load() {
		// Admitted before a store error's answer: its wait may be the
		// outage's (retries, then the backlog once the store is back),
		// which says nothing of the relay's capacity (see failed).
		v.idle()
		return
	}
	if inflight > 0 {
		v.sojourn.Store(int64(now.Sub(t0)))
		v.stalled.Store(now.UnixNano())
	} else {
		v.sojourn.Store(0)
		v.stalled.Store(0)
	}
}

// idle records that nothing is in flight (an EVENT ended without an
// answer through the pipeline, a duplicate found before verification,
// left none): no standing wait, as in answered.
func (v *waitValve) idle() {
	if v.max <= 0 {
		return
	}
	v.sojourn.Store(0)
	v.stalled.Store(0)
}

// failed records an EVENT answered with a store error: the store ended
// it, not a lack of capacity (a database that is down answers each batch
// only after the writer's retries, so every sojourn would pass the
// bound). Such answers must not shut the valve on the EVENTs that do not
// wait for the store: ephemeral events, whose live delivery goes on
// through an outage, while stored ones are answered "error:", not
// "rate-limited:". So they show no standing wait, as idle does, and
// neither do the answers of EVENTs admitted before it (answered), which
// may have waited out the same outage.
func (v *waitValve) failed(now time.Time) {
	if v.max <= 0 {
		return
	}
	storeMax(&v.failure, now.UnixNano())
	v.idle()
}

// wait is the valve's estimate of how long the EVENTs in flight have been
// waiting at now (a lower bound; see waitValve).
func (v *waitValve) wait(now time.Time) time.Duration {
	w := time.Duration(v.sojourn.Load())
	if at := v.stalled.Load(); at != 0 {
		w = max(w, time.Duration(now.UnixNano()-at))
	}
	return w
}

// over reports whether an EVENT read at now must be refused: inflight
// EVENTs (not counting it) are in flight and wait longer than the bound.
// With nothing in flight there is nothing to wait behind.
func (v *waitValve) over(now time.Time, inflight int64) bool {
	return v.max > 0 && inflight > 0 && v.wait(now) > v.max
}
