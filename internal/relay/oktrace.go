package relay

import (
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/petrel-relay/petrel/internal/nostr"
)

// OKRecord is one EVENT's passage through the relay, for a load client
// that wants to split the latency it saw (send to OK) into the part
// before the relay parsed the EVENT, the part inside, and the part after
// the OK was queued: times are Unix nanoseconds of the relay's wall
// clock, so they compare with a client's only on the same host. A trace
// records the EVENTs whose OK the dispatcher queues: the store's answers
// (stored, superseded, failed, and the duplicates its writer found),
// held and ephemeral events; not those answered before the store
// (invalid, rate-limited, blocked by policy, and the duplicates the
// precheck found, most of them). Verified and Committed are zero for those that did not go
// through the writer's queue (ephemeral, held).
type OKRecord struct {
	ID        nostr.ID
	Received  int64 // parsed (OKLatency's start)
	Verified  int64 // handed to the store (OKStages "verify" ends)
	Committed int64 // the commit's reply (OKStages "store" ends)
	Answered  int64 // OK queued for the connection
}

// OKTraceMax is the most records one trace keeps (64 bytes each): at
// 10,000 answered EVENTs a second, 80 s. Past it the trace counts what
// it dropped.
const OKTraceMax = 800_000

// OKTraceLimit is how long a trace may run before it ends by itself and
// its records are discarded (a client that started one and went away
// leaves no memory behind).
const OKTraceLimit = 10 * time.Minute

var okTraceLimit = OKTraceLimit // shortened by tests

// ErrOKTraceRunning and ErrOKTraceIdle are StartOKTrace's and
// StopOKTrace's refusals: one trace at a time.
var (
	ErrOKTraceRunning = errors.New("an OK trace is already running")
	ErrOKTraceIdle    = errors.New("no OK trace is running")
)

// okTrace holds the running trace. on is read by the dispatcher for
// every OK (one atomic load when no trace runs); recs is appended by the
// dispatcher alone, under mu against Start/Stop.
type okTrace struct {
	on      atomic.Bool
	mu      sync.Mutex
	recs    []OKRecord
	max     int
	dropped int64
	timer   *time.Timer
	gen     uint64 // which trace the timer belongs to
}

// StartOKTrace starts recording an OKRecord for every EVENT answered
// from now on, at most max records (0: OKTraceMax), until StopOKTrace or
// OKTraceLimit.
func (r *Relay) StartOKTrace(max int) error {
	t := &r.okTrace
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.on.Load() {
		return ErrOKTraceRunning
	}
	if max <= 0 || max > OKTraceMax {
		max = OKTraceMax
	}
	t.max, t.dropped, t.recs = max, 0, make([]OKRecord, 0, min(max, 4096))
	t.gen++
	gen := t.gen
	t.timer = time.AfterFunc(okTraceLimit, func() {
		t.mu.Lock()
		defer t.mu.Unlock()
		if t.gen == gen && t.on.Load() {
			t.on.Store(false)
			t.recs = nil
		}
	})
	t.on.Store(true)
	return nil
}

// StopOKTrace ends the trace and returns its records, in the order the
// OKs were queued, and how many it dropped past its maximum.
func (r *Relay) StopOKTrace() ([]OKRecord, int64, error) {
	t := &r.okTrace
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.on.Load() {
		return nil, 0, ErrOKTraceIdle
	}
	t.on.Store(false)
	t.timer.Stop()
	recs, dropped := t.recs, t.dropped
	t.recs = nil
	return recs, dropped, nil
}

// record adds one answered EVENT; the dispatcher calls it when on.
func (t *okTrace) record(id nostr.ID, received, verified, committed, answered time.Time) {
	rec := OKRecord{ID: id, Received: received.UnixNano(), Answered: answered.UnixNano()}
	if !verified.IsZero() {
		rec.Verified, rec.Committed = verified.UnixNano(), committed.UnixNano()
	}
	t.mu.Lock()
	if t.on.Load() {
		if len(t.recs) < t.max {
			t.recs = append(t.recs, rec)
		} else {
			t.dropped++
		}
	}
	t.mu.Unlock()
}
