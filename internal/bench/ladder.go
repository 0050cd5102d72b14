package bench

import (
	"context"
	"fmt"
	"math"
	"strings"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/petrel-relay/petrel/internal/nostr"
)

// LadderStep is one offered rate of the ladder.
type LadderStep struct {
	Offered     float64 `json:"offered_per_s"`
	HoldSeconds float64 `json:"hold_s"`
	Scheduled   int64   `json:"scheduled"` // events the schedule called for
	Sent        int64   `json:"sent"`
	Accepted    int64   `json:"accepted"`
	// Refused counts OK false by prefix; RateLimited is its
	// "rate-limited" entry (explicit refusals, as opposed to silent
	// queueing, which shows as latency).
	Refused     map[string]int64 `json:"refused,omitempty"`
	RateLimited int64            `json:"rate_limited"`
	Missing     int64            `json:"missing_oks"` // no OK when the step's drain ended (drainStall without one)
	// Achieved is accepted events per second from the step's start to its
	// last OK.
	Achieved float64 `json:"accepted_per_s"`
	// ErrorRate is (refused + missing) / sent.
	ErrorRate float64 `json:"error_rate"`
	// Latency is OK latency measured from each event's scheduled send time
	// (so a generator delay is not hidden); it decides the verdict.
	// LatencyFromSend is measured from the moment the event was actually
	// written, and shows how much of Latency is the generator's lag.
	Latency         Summary `json:"ok_latency"`
	LatencyFromSend Summary `json:"ok_latency_from_send"`
	// LagP99Ms and LagMaxMs digest how late the generator sent events
	// against the schedule; LagEndMs is how late the step's last event
	// went out. Behind: LagP99Ms or LagEndMs exceeded 3% of the hold (or
	// the step could not send everything), so the step measured the
	// client (or a starved machine) and is excluded from the knee and
	// capacity.
	LagP99Ms float64 `json:"lag_p99_ms"`
	LagMaxMs float64 `json:"lag_max_ms"`
	LagEndMs float64 `json:"lag_end_ms"`
	Behind   bool    `json:"generator_behind"`
	// Cut: the scenario's timeout ended the step (its sending or its
	// drain), so its unanswered events say nothing of the relay; it is
	// excluded like a step whose generator fell behind.
	Cut bool `json:"cut_by_timeout,omitempty"`
	// RelayCPUSeconds is the relay's CPU time over the step (with
	// Options.PID), and RelayCPUMicrosPerEvent per accepted event.
	RelayCPUSeconds        float64 `json:"relay_cpu_s,omitempty"`
	RelayCPUMicrosPerEvent float64 `json:"relay_cpu_us_per_event,omitempty"`
	// EventsPerCommit is the step's accepted events over the synced
	// commits the relay's store made meanwhile (a petrel relay: /stats
	// store_commits, with PostgreSQL its write transactions), 0 where
	// not known: how many events shared each commit's fsync.
	EventsPerCommit float64 `json:"events_per_commit,omitempty"`
	// RelayOKP99Ms bounds the relay's own OK p99 over the step: the
	// upper bound of the bucket of a petrel relay's ok_latency histogram
	// (/stats: from the EVENT's parse to its OK queued) that holds the
	// step's 99th percentile, 0 where not known; RelayOKP99Above: past
	// the last bucket. The buckets double (12.8, 25.6 ms, ...): set
	// beside the client's p99, it says whether the tail is in the
	// relay's stages or around them (the socket, the OK's write, the
	// client).
	RelayOKP99Ms    float64 `json:"relay_ok_p99_max_ms,omitempty"`
	RelayOKP99Above bool    `json:"relay_ok_p99_above,omitempty"`
	// Store is what a petrel relay's embedded store did in the
	// background over the step (/stats store_background), nil where not
	// known: a step's tail often goes with its flushes and compactions.
	Store *StepStore `json:"store,omitempty"`
	// OKTrace splits the step's latency with the relay's OK trace
	// (Options.OKTrace); nil without one.
	OKTrace *OKSplit `json:"ok_trace,omitempty"`
	// Verdict: "pass", "queueing" (p99 over the bound, errors within),
	// "refusing" (errors over the bound, mostly rate-limited), "errors"
	// (other refusals or missing OKs), "behind" or "timeout" (both
	// excluded).
	Verdict string `json:"verdict"`
}

// LadderResult is the ladder's steps and what they imply.
type LadderResult struct {
	Steps        []LadderStep `json:"steps"`
	MaxP99Ms     float64      `json:"max_p99_ms"`
	MaxErrorRate float64      `json:"max_error_rate"`
	// Knee is the highest step that passes with every lower (not
	// excluded) step passing; nil when the lowest step fails.
	Knee      *LadderStep `json:"knee"`
	KneeIndex int         `json:"knee_index"` // -1: none
	// Capacity is the highest accepted rate among steps (not excluded)
	// with ErrorRate within the bound; CapacityIndex is its step (-1:
	// none).
	Capacity      float64 `json:"capacity_per_s"`
	CapacityIndex int     `json:"capacity_index"`
	// Stopped says why the ladder ended before its last step, if it did.
	Stopped string `json:"stopped,omitempty"`
}

// drainStall ends a step's wait for its outstanding OKs when none has
// arrived for this long; the rest count as missing.
const drainStall = 10 * time.Second

// behindFraction of the hold is how late the generator may send a step's
// last event, or its 99th percentile event, before the step counts as the
// generator falling behind.
const behindFraction = 0.03

// Judge sets each step's Verdict against maxP99 and maxErrorRate.
func Judge(steps []LadderStep, maxP99 time.Duration, maxErrorRate float64) {
	lim := float64(maxP99) / 1e6
	for i := range steps {
		s := &steps[i]
		switch {
		case s.Cut:
			s.Verdict = "timeout"
		case s.Behind:
			s.Verdict = "behind"
		case s.Sent == 0:
			s.Verdict = "errors"
		case s.ErrorRate > maxErrorRate && s.Missing == 0 && s.RateLimited*2 >= s.Sent-s.Accepted:
			s.Verdict = "refusing"
		case s.ErrorRate > maxErrorRate:
			s.Verdict = "errors"
		case s.Latency.P99 > lim:
			s.Verdict = "queueing"
		default:
			s.Verdict = "pass"
		}
	}
}

// KneeAndCapacity computes, from judged steps in ascending offered order,
// the knee (the highest passing step with every lower step passing; steps
// whose generator fell behind, or that the timeout cut, are skipped,
// neither passing nor failing) and the capacity (the highest Achieved
// among steps not skipped with ErrorRate <= maxErrorRate). Indexes are -1
// when there is none.
func KneeAndCapacity(steps []LadderStep, maxErrorRate float64) (knee int, capacity float64, capIdx int) {
	knee, capIdx = -1, -1
	for i, s := range steps {
		if excluded(s) {
			continue
		}
		if s.Verdict != "pass" {
			break
		}
		knee = i
	}
	for i, s := range steps {
		if excluded(s) || s.Sent == 0 || s.ErrorRate > maxErrorRate {
			continue
		}
		if s.Achieved > capacity {
			capacity, capIdx = s.Achieved, i
		}
	}
	return knee, capacity, capIdx
}

// excluded reports whether a judged step is left out of the knee and the
// capacity: it measured the client or the timeout, not the relay.
func excluded(s LadderStep) bool { return s.Verdict == "behind" || s.Verdict == "timeout" }

// ladderStepState collects one step's answers.
type ladderStepState struct {
	lo, hi   int // event indexes
	mu       sync.Mutex
	accepted int64
	refused  map[string]int64
	answered int64
	lastOK   time.Duration // since the tracker's base
	hist     Hist          // from the scheduled time
	histSent Hist          // from the actual send
	lag      Hist
	lagEnd   time.Duration
	sent     atomic.Int64
}

// Ladder offers events at each of Options.Rates for Options.Hold over
// Options.Conns connections, open loop: each event is sent at its
// scheduled time whatever the OKs do. Between steps it waits for the
// outstanding OKs. It reports each step and the knee and capacity.
func Ladder(o Options) (*Result, error) {
	r, err := newRunner(ScenarioLadder, o)
	if err != nil {
		return nil, err
	}
	o = r.o
	rates := append([]float64(nil), o.Rates...)
	counts := make([]int, len(rates))
	total := 0
	for i, rate := range rates {
		if rate <= 0 || (i > 0 && rate <= rates[i-1]) {
			return nil, fmt.Errorf("%w: ladder rates must be positive and increasing: %v", ErrOptions, rates)
		}
		counts[i] = int(math.Ceil(rate * o.Hold.Seconds()))
		total += counts[i]
	}
	if total > o.MaxEvents {
		return nil, fmt.Errorf("%w: the ladder needs %d events, more than --max-events %d", ErrOptions, total, o.MaxEvents)
	}
	r.param("rates", rates)
	r.param("hold_s", o.Hold.Seconds())
	r.param("conns", o.Conns)
	r.param("max_p99_ms", float64(o.MaxP99)/1e6)
	r.param("max_error_rate", o.MaxErrorRate)
	set, err := r.signFrames(r.generator(ScenarioLadder, total), 0, total)
	if err != nil {
		return nil, err
	}
	tr := newOKTracker(set)
	actual := make([]atomic.Int64, total) // actual send time, nanoseconds since tr.base
	states := make([]*ladderStepState, len(rates))
	lo := 0
	for i := range states {
		states[i] = &ladderStepState{lo: lo, hi: lo + counts[i], refused: map[string]int64{}}
		lo += counts[i]
	}
	stepOf := func(idx int) *ladderStepState {
		for _, s := range states {
			if idx < s.hi {
				return s
			}
		}
		return nil
	}
	conns, ok := r.dialMany(o.Conns, func(int) DialConfig { return DialConfig{} }, func(int) func(*nostr.RelayMessage, time.Time) bool {
		return func(m *nostr.RelayMessage, at time.Time) bool {
			if m.Type != nostr.LabelOK {
				return false
			}
			idx, first := tr.handleOK(m, at)
			if !first {
				return true
			}
			s := stepOf(idx)
			sent, _ := tr.sentOffset(idx)
			off := at.Sub(tr.base)
			s.mu.Lock()
			s.answered++
			if m.OK {
				s.accepted++
			} else {
				s.refused[prefixOf(m.Message)]++
			}
			s.hist.Record(int64(off - sent))
			s.histSent.Record(int64(off) - actual[idx].Load())
			s.lastOK = max(s.lastOK, off)
			s.mu.Unlock()
			return true
		}
	})
	lr := &LadderResult{MaxP99Ms: float64(o.MaxP99) / 1e6, MaxErrorRate: o.MaxErrorRate, KneeIndex: -1, CapacityIndex: -1}
	r.res.Ladder = lr
	if !ok {
		r.checkConns()
		return r.finish(), nil
	}
	r.startMeasure()
	tr.start()
	var procFS ProcFS
	// The relay's commit count and OK histogram, read between steps (a
	// petrel relay; not asked again of another).
	figs, haveFigs := readRelayStats(r.ctx, o.URL)
	haveFigs = haveFigs && (figs.haveCommits || figs.haveOK)
	// The relay's OK trace, one a step (--oktrace).
	var trace *okTrace
	if o.OKTrace != "" {
		trace = newOKTrace(o.OKTrace)
	}
	sentWall := func(i int) int64 {
		if v := actual[i].Load(); v != 0 {
			return tr.base.UnixNano() + v
		}
		return 0
	}
	okWall := func(i int) int64 {
		if d, ok := tr.okOffset(i); ok {
			return tr.base.UnixNano() + int64(d)
		}
		return 0
	}
	for i, s := range states {
		if r.ctx.Err() != nil {
			lr.Stopped = "deadline passed"
			break
		}
		// The trace is started before and stopped after the step's CPU
		// time is read: its HTTP requests are not the step's.
		if trace != nil {
			if err := trace.start(r.ctx); err != nil {
				r.res.Note("--oktrace: no OK trace from %s: %v", o.OKTrace, err)
				trace = nil
			}
		}
		var cpu0 time.Duration
		if o.PID != 0 {
			if st, err := procFS.Read(o.PID); err == nil {
				cpu0 = st.CPU
			}
		}
		stop := r.phase(fmt.Sprintf("step %d/%d: %s events/s", i+1, len(states), human(rates[i])), int64(counts[i]), s.sent.Load)
		step := r.runStep(conns, tr, actual, s, rates[i], o.Hold)
		stop()
		if r.ctx.Err() != nil && (step.Missing > 0 || step.Sent < step.Scheduled) {
			step.Cut = true
			r.timedOut(fmt.Sprintf("the step at %s events/s (raise --timeout): its %d unanswered events are not judged",
				human(rates[i]), step.Missing))
		}
		if o.PID != 0 {
			if st, err := procFS.Read(o.PID); err == nil {
				step.RelayCPUSeconds = (st.CPU - cpu0).Seconds()
				if step.Accepted > 0 {
					step.RelayCPUMicrosPerEvent = step.RelayCPUSeconds * 1e6 / float64(step.Accepted)
				}
			}
		}
		if trace != nil {
			// Stopped even when the run's deadline ended the step.
			recs, dropped, err := trace.stop(context.Background())
			if err != nil {
				r.res.Note("--oktrace: the OK trace of the step at %s events/s: %v", human(rates[i]), err)
				trace = nil
			} else if step.OKTrace = splitOKs(set.Index, sentWall, okWall, s.lo, s.hi, recs); step.OKTrace != nil {
				step.OKTrace.Dropped = dropped
			}
		}
		if haveFigs {
			// Read even when the run's deadline ended the step.
			if now, ok := readRelayStats(context.Background(), o.URL); ok {
				if now.haveCommits && figs.haveCommits && now.commits > figs.commits {
					step.EventsPerCommit = float64(step.Accepted) / float64(now.commits-figs.commits)
				}
				if p, above, ok := okP99Bound(figs, now); ok {
					step.RelayOKP99Ms, step.RelayOKP99Above = p, above
				}
				step.Store = stepStore(figs, now)
				figs = now
			}
		}
		lr.Steps = append(lr.Steps, step)
		Judge(lr.Steps, o.MaxP99, o.MaxErrorRate)
		last := lr.Steps[len(lr.Steps)-1]
		if i < len(states)-1 {
			switch {
			case last.Cut:
				lr.Stopped = fmt.Sprintf("the timeout ended the step at %s events/s", human(last.Offered))
			case last.Missing > 0:
				lr.Stopped = fmt.Sprintf("%d OKs missing at %s events/s", last.Missing, human(last.Offered))
			case last.ErrorRate > 0.5:
				lr.Stopped = fmt.Sprintf("more than half the events refused at %s events/s", human(last.Offered))
			case last.Latency.P99 > 2000:
				lr.Stopped = fmt.Sprintf("p99 over 2 s at %s events/s", human(last.Offered))
			}
			if lr.Stopped != "" {
				break
			}
		}
	}
	end := tr.end()
	c := tr.snapshot()
	r.stopMeasure(end, c.Accepted, 0)
	r.res.OK = c
	r.res.Latency = map[string]Summary{"ok": tr.hist.Snapshot().Summary()}
	knee, capacity, capIdx := KneeAndCapacity(lr.Steps, o.MaxErrorRate)
	lr.KneeIndex, lr.Capacity, lr.CapacityIndex = knee, capacity, capIdx
	if knee >= 0 {
		k := lr.Steps[knee]
		lr.Knee = &k
	}
	if lr.Stopped != "" {
		r.res.Note("ladder stopped early: %s", lr.Stopped)
	}
	var behind int
	for _, s := range lr.Steps {
		if s.Behind {
			behind++
		}
	}
	if behind > 0 {
		r.res.Note("%d steps excluded: the generator fell behind its schedule by more than %.0f%% of the hold", behind, behindFraction*100)
	}
	var late int64
	for _, s := range lr.Steps {
		late += s.Missing
	}
	if late > 0 && c.Missing == 0 {
		r.res.Fail("%d OKs arrived only after their step's drain gave up (%v without an OK); counted missing in their step", late, drainStall)
	}
	r.judgeOK(c, true)
	r.checkConns()
	return r.finish(), nil
}

// runStep sends one step's events on schedule and waits for their OKs.
func (r *runner) runStep(conns []*Conn, tr *okTracker, actual []atomic.Int64, s *ladderStepState, rate float64, hold time.Duration) LadderStep {
	n := s.hi - s.lo
	nc := len(conns)
	start := time.Now().Add(5 * time.Millisecond)
	var wg sync.WaitGroup
	var sendErr atomic.Pointer[error]
	for k, c := range conns {
		wg.Add(1)
		go func(k int, c *Conn) {
			defer wg.Done()
			var lag Hist
			var lastLag time.Duration
			defer func() {
				s.mu.Lock()
				s.lag.Merge(&lag)
				s.lagEnd = max(s.lagEnd, lastLag)
				s.mu.Unlock()
			}()
			timer := time.NewTimer(time.Hour)
			defer timer.Stop()
			for j := k; j < n; j += nc {
				due := start.Add(time.Duration(float64(j) / rate * float64(time.Second)))
				if !r.sleepUntil(timer, due) {
					return
				}
				now := time.Now()
				lastLag = now.Sub(due)
				lag.RecordDuration(lastLag)
				i := s.lo + j
				actual[i].Store(int64(now.Sub(tr.base)))
				tr.markSent(i, due)
				if err := c.Send(tr.set.Frames[i]); err != nil {
					tr.unsend(i)
					sendErr.CompareAndSwap(nil, &err)
					return
				}
				s.sent.Add(1)
			}
		}(k, c)
	}
	wg.Wait()
	if e := sendErr.Load(); e != nil {
		r.res.Fail("ladder at %s events/s: send: %v", human(rate), *e)
	}
	// Drain: wait for the step's OKs, until none has arrived for
	// drainStall (or the deadline passes).
	sent := s.sent.Load()
	var seen int64 = -1
	lastChange := time.Now()
	waitUntil(r.ctx, func() bool {
		s.mu.Lock()
		n := s.answered
		s.mu.Unlock()
		if n != seen {
			seen, lastChange = n, time.Now()
		}
		return n >= sent || time.Since(lastChange) > drainStall
	})
	s.mu.Lock()
	defer s.mu.Unlock()
	st := LadderStep{
		Offered: rate, HoldSeconds: hold.Seconds(), Scheduled: int64(n), Sent: sent,
		Accepted: s.accepted, Refused: copyCounts(s.refused), RateLimited: s.refused[string(nostr.PrefixRateLimited)],
		Missing: sent - s.answered, Latency: s.hist.Summary(), LatencyFromSend: s.histSent.Summary(),
		LagP99Ms: float64(s.lag.Percentile(99)) / 1e6, LagMaxMs: float64(s.lag.Max()) / 1e6, LagEndMs: float64(s.lagEnd) / 1e6,
	}
	if sent > 0 {
		var refused int64
		for _, v := range s.refused {
			refused += v
		}
		st.ErrorRate = float64(refused+st.Missing) / float64(sent)
	}
	if d := tr.base.Add(s.lastOK).Sub(start).Seconds(); d > 0 {
		st.Achieved = float64(s.accepted) / d
	}
	limit := behindFraction * float64(hold)
	st.Behind = sent < int64(n) || float64(s.lagEnd) > limit || float64(s.lag.Percentile(99)) > limit
	return st
}

// StepStore is a ladder step's share of the relay store's background
// work: memtable flushes and compactions finished in it, the megabytes
// the compactions wrote, write stalls begun in it and the time commits
// were stalled, and level 0's depth at the step's end.
type StepStore struct {
	Flushes      int64   `json:"flushes"`
	Compactions  int64   `json:"compactions"`
	CompactionMB float64 `json:"compaction_mb"`
	WriteStalls  int64   `json:"write_stalls"`
	WriteStallMs float64 `json:"write_stall_ms"`
	L0Sublevels  int64   `json:"l0_sublevels_end"`
}

// table renders the steps for the human report.
func (l *LadderResult) table() string {
	var b strings.Builder
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "offered/s\tsent\taccepted/s\trefused\trate-limited\tmissing\terr%\tok p50\tok p99\tp99 from send\tlag p99\tlag end\trelay µs/ev\tev/commit\tflush/compact/stall ms\trelay p99 <=\ttail: before/in/after\tverdict\t")
	for i, s := range l.Steps {
		mark := ""
		if i == l.KneeIndex {
			mark += " <- knee"
		}
		if i == l.CapacityIndex {
			mark += " <- capacity"
		}
		var refused int64
		for _, v := range s.Refused {
			refused += v
		}
		cpu := "-"
		if s.RelayCPUMicrosPerEvent > 0 {
			cpu = fmt.Sprintf("%.1f", s.RelayCPUMicrosPerEvent)
		}
		perCommit := "-"
		if s.EventsPerCommit > 0 {
			perCommit = fmt.Sprintf("%.2f", s.EventsPerCommit)
		}
		bg := "-"
		if st := s.Store; st != nil {
			bg = fmt.Sprintf("%d/%d/%.0f", st.Flushes, st.Compactions, st.WriteStallMs)
		}
		relayP99 := "-"
		switch {
		case s.RelayOKP99Above:
			relayP99 = "> " + ms(s.RelayOKP99Ms)
		case s.RelayOKP99Ms > 0:
			relayP99 = ms(s.RelayOKP99Ms)
		}
		split := "-"
		if t := s.OKTrace; t != nil {
			split = fmt.Sprintf("%.1f/%.1f/%.1f ms", t.TailBeforeMs, t.TailInsideMs, t.TailAfterMs)
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%d\t%d\t%d\t%.3f\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s%s\t\n",
			human(s.Offered), s.Sent, human(s.Achieved), refused, s.RateLimited, s.Missing, s.ErrorRate*100,
			ms(s.Latency.P50), ms(s.Latency.P99), ms(s.LatencyFromSend.P99), ms(s.LagP99Ms), ms(s.LagEndMs), cpu, perCommit, bg, relayP99, split, s.Verdict, mark)
	}
	tw.Flush()
	knee := "none (the lowest step fails)"
	if l.Knee != nil {
		knee = human(l.Knee.Offered) + " events/s offered"
	}
	fmt.Fprintf(&b, "knee: %s (p99 <= %s and errors <= %.2f%% with every lower step passing)\n", knee, ms(l.MaxP99Ms), l.MaxErrorRate*100)
	fmt.Fprintf(&b, "capacity: %s accepted events/s (highest with errors <= %.2f%%)\n", human(l.Capacity), l.MaxErrorRate*100)
	return b.String()
}
