package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/petrel-relay/petrel/internal/nostr"
)

// RelayInfo is the part of a relay's NIP-11 document the bench uses.
type RelayInfo struct {
	Software      string
	Version       string
	SupportedNIPs []int
	MaxLimit      int // 0: not stated
	MaxFilters    int // 0: not stated
}

// Supports reports whether the document lists nip.
func (ri *RelayInfo) Supports(nip int) bool {
	for _, n := range ri.SupportedNIPs {
		if n == nip {
			return true
		}
	}
	return false
}

// FetchRelayInfo reads the NIP-11 document of the relay at wsURL.
func FetchRelayInfo(ctx context.Context, wsURL string) (*RelayInfo, error) {
	u := "http" + strings.TrimPrefix(wsURL, "ws")
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/nostr+json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("NIP-11: HTTP %s", resp.Status)
	}
	var doc struct {
		Software      string `json:"software"`
		Version       string `json:"version"`
		SupportedNIPs []any  `json:"supported_nips"`
		Limitation    struct {
			MaxLimit   int `json:"max_limit"`
			MaxFilters int `json:"max_filters"`
		} `json:"limitation"`
	}
	dec := json.NewDecoder(http.MaxBytesReader(nil, resp.Body, 1<<20))
	if err := dec.Decode(&doc); err != nil {
		return nil, fmt.Errorf("NIP-11: %w", err)
	}
	ri := &RelayInfo{Software: doc.Software, Version: doc.Version,
		MaxLimit: doc.Limitation.MaxLimit, MaxFilters: doc.Limitation.MaxFilters}
	for _, v := range doc.SupportedNIPs {
		switch n := v.(type) {
		case float64:
			ri.SupportedNIPs = append(ri.SupportedNIPs, int(n))
		case string:
			if k, err := strconv.Atoi(n); err == nil {
				ri.SupportedNIPs = append(ri.SupportedNIPs, k)
			}
		}
	}
	return ri, nil
}

// relayInfo fetches NIP-11 and notes what it says (or that it failed).
func (r *runner) relayInfo() *RelayInfo {
	ri, err := FetchRelayInfo(r.ctx, r.o.URL)
	if err != nil {
		r.res.Note("NIP-11 document unavailable (%v): relay limits unknown", err)
		return &RelayInfo{}
	}
	sw := ri.Software
	if ri.Version != "" {
		sw += " " + ri.Version
	}
	if sw != "" {
		r.param("relay_software", sw)
	}
	if ri.MaxLimit > 0 {
		r.param("relay_max_limit", ri.MaxLimit)
	}
	return ri
}

// fill stores n generated events (stream "fill") over 4 connections and
// returns the generator and, per author, how many of its events the relay
// accepted in this fill (new or already there).
func (r *runner) fill(n int) (*Generator, []int) {
	g := r.generator("fill", n)
	perAuthor := make([]int, g.Config().Authors)
	r.param("fill", n)
	if n == 0 {
		return g, nil
	}
	set, err := r.signFrames(g, 0, n)
	if err != nil {
		r.res.Fail("sign fill: %v", err)
		return g, nil
	}
	tr := newOKTracker(set)
	pcs, ok := r.openPublishers(min(4, n), r.o.Window, tr, nil)
	if !ok {
		return g, nil
	}
	stop := r.phase("filling", int64(n), tr.nAnswered.Load)
	t0 := time.Now()
	tr.start()
	r.publishWindowed(pcs, tr)
	stop()
	end := tr.end()
	for _, pc := range pcs {
		pc.c.Close()
	}
	c := tr.snapshot()
	f := &FillResult{Events: n, Seconds: end.Sub(t0).Seconds(), OK: c}
	if f.Seconds > 0 {
		f.Accepted = float64(c.Accepted) / f.Seconds
	}
	r.res.Fill = f
	if c.Missing > 0 {
		r.res.Fail("fill: %d of %d events got no OK", c.Missing, c.Sent)
	}
	if k := c.RefusedTotal(); k > 0 {
		r.res.Fail("fill: %d of %d events refused (%s)", k, c.Sent, formatCounts(c.Refused))
	}
	for i := 0; i < set.Len(); i++ {
		if st := tr.state[i].Load(); st == okNew || st == okPrefixed {
			perAuthor[g.AuthorOf(i)]++
		}
	}
	return g, perAuthor
}

// query is one REQ to measure.
type query struct {
	subID   string
	frame   []byte
	match   func(ev *nostr.Event) bool // false: the event does not belong in the answer
	atLeast int                        // fewer events than this is a short answer (0: no check)
}

// activeQuery is a query in flight on a qconn.
type activeQuery struct {
	q          query
	sent       time.Time
	n          int64
	bytes      int64
	mismatched int64
	dups       int64
	unordered  bool
	last       int64
	seen       map[nostr.ID]struct{}
	done       chan string // "" for EOSE, else the CLOSED message
	latency    time.Duration
	closed     bool
}

// qconn runs queries one at a time on one connection.
type qconn struct {
	c   *Conn
	mu  sync.Mutex
	cur *activeQuery
}

func (q *qconn) handle(m *nostr.RelayMessage, at time.Time) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	a := q.cur
	if a == nil || m.SubID != a.q.subID {
		return false
	}
	switch m.Type {
	case nostr.LabelEvent:
		a.n++
		a.bytes += int64(len(m.RawEvent)) + int64(len(a.q.subID)) + 12
		if _, dup := a.seen[m.Event.ID]; dup {
			a.dups++
		}
		a.seen[m.Event.ID] = struct{}{}
		if a.q.match != nil && !a.q.match(m.Event) {
			a.mismatched++
		}
		if a.n > 1 && m.Event.CreatedAt > a.last {
			a.unordered = true
		}
		a.last = m.Event.CreatedAt
	case nostr.LabelEOSE:
		a.latency = at.Sub(a.sent)
		q.cur = nil
		a.done <- ""
	case nostr.LabelClosed:
		a.closed = true
		q.cur = nil
		a.done <- m.Message
	default:
		return false
	}
	return true
}

// runQueries runs o.Requests queries made by mk over o.Conns connections,
// one at a time per connection, and fills the result's query figures.
func (r *runner) runQueries(mk func(j int) query, shape string) {
	o := r.o
	qcs := make([]*qconn, o.Conns)
	for k := range qcs {
		qcs[k] = &qconn{}
	}
	conns, ok := r.dialMany(o.Conns, func(int) DialConfig { return DialConfig{} }, func(k int) func(*nostr.RelayMessage, time.Time) bool {
		return qcs[k].handle
	})
	if !ok {
		return
	}
	for k, c := range conns {
		qcs[k].c = c
	}
	qs := &QueryStats{Filters: shape, EventsMin: -1}
	var hist LockedHist
	var next, completed atomic.Int64
	var mu sync.Mutex // guards qs, sendErrs
	var sendErrs []string
	var lastEnd atomic.Int64
	stop := r.phase("querying", int64(o.Requests), completed.Load)
	r.startMeasure()
	var wg sync.WaitGroup
	for _, qc := range qcs {
		wg.Add(1)
		go func(qc *qconn) {
			defer wg.Done()
			for r.ctx.Err() == nil {
				j := int(next.Add(1)) - 1
				if j >= o.Requests {
					return
				}
				q := mk(j)
				a := &activeQuery{q: q, seen: map[nostr.ID]struct{}{}, done: make(chan string, 1)}
				qc.mu.Lock()
				qc.cur = a
				a.sent = time.Now()
				qc.mu.Unlock()
				if err := qc.c.Send(q.frame); err != nil {
					mu.Lock()
					sendErrs = append(sendErrs, fmt.Sprintf("send REQ: %v", err))
					mu.Unlock()
					return
				}
				var msg string
				select {
				case msg = <-a.done:
				case <-r.ctx.Done():
					mu.Lock()
					qs.Requests++
					qs.TimedOut++
					mu.Unlock()
					return
				case <-qc.c.Done():
					mu.Lock()
					qs.Requests++
					qs.TimedOut++
					mu.Unlock()
					return
				}
				lastEnd.Store(time.Now().UnixNano())
				mu.Lock()
				qs.Requests++
				if a.closed {
					qs.Closed++
					r.countClosed(msg)
				} else {
					qs.Completed++
					hist.Record(int64(a.latency))
					qs.EventsTotal += a.n
					if qs.EventsMin < 0 || a.n < qs.EventsMin {
						qs.EventsMin = a.n
					}
					qs.EventsMax = max(qs.EventsMax, a.n)
					qs.Mismatched += a.mismatched
					qs.DupInResponse += a.dups
					qs.Bytes += a.bytes
					if a.unordered {
						qs.Unordered++
					}
					if q.atLeast > 0 && a.n < int64(q.atLeast) {
						r.short.Add(1)
					}
				}
				mu.Unlock()
				completed.Add(1)
				if !a.closed {
					close := []byte(`["CLOSE",`)
					close = nostr.AppendString(close, q.subID)
					close = append(close, ']')
					if err := qc.c.Send(close); err != nil {
						mu.Lock()
						sendErrs = append(sendErrs, fmt.Sprintf("send CLOSE: %v", err))
						mu.Unlock()
						return
					}
				}
			}
		}(qc)
	}
	wg.Wait()
	stop()
	for _, e := range sendErrs {
		r.res.Fail("%s", e)
	}
	end := time.Unix(0, lastEnd.Load())
	if lastEnd.Load() == 0 {
		end = time.Now()
	}
	r.stopMeasure(end, 0, 0)
	for _, u := range []*Usage{r.res.Relay, r.res.Client} {
		if u != nil && qs.Completed > 0 {
			u.CPUMicrosPerRequest = u.CPUSeconds * 1e6 / float64(qs.Completed)
		}
	}
	if qs.EventsMin < 0 {
		qs.EventsMin = 0
	}
	r.res.Queries = qs
	r.res.Latency = map[string]Summary{"eose": hist.Snapshot().Summary()}
	r.res.Rates = map[string]float64{"requests": r.rate(qs.Completed, end)}
	r.timedOut("waiting for EOSE")
	if qs.TimedOut > 0 && r.ctx.Err() == nil {
		r.res.Fail("%d REQs ended without EOSE (connection lost)", qs.TimedOut)
	}
	if n := r.short.Load(); n > 0 {
		r.res.Fail("%d of %d answers had fewer events than the store holds for the filter (relay truncated the result?)", n, qs.Completed)
	}
	if qs.DupInResponse > 0 {
		r.res.Fail("%d events returned twice within one answer", qs.DupInResponse)
	}
	if qs.Unordered > 0 {
		r.res.Note("%d of %d answers were not in descending created_at order", qs.Unordered, qs.Completed)
	}
	r.checkConns()
}

// splitLimit divides limit over k filters as evenly as possible.
func splitLimit(limit, k int) []int {
	out := make([]int, k)
	for i := range out {
		out[i] = limit / k
		if i < limit%k {
			out[i]++
		}
	}
	return out
}

// prepareQueries does what the query scenarios share before their
// queries: records their parameters, reads the relay's NIP-11 document and
// fills the store. ok is false when the fill failed; the caller then
// returns r.finish().
func (r *runner) prepareQueries() (ri *RelayInfo, g *Generator, perAuthor []int, ok bool) {
	r.param("requests", r.o.Requests)
	r.param("conns", r.o.Conns)
	ri = r.relayInfo()
	g, perAuthor = r.fill(r.o.Fill)
	if r.Failed() {
		r.checkConns()
		return ri, g, perAuthor, false
	}
	return ri, g, perAuthor, true
}

// Req fills the store (Options.Fill events over Options.Authors authors),
// then repeats a REQ for Options.Limit kind-1 events by the bench's
// authors and measures the time to EOSE. If the relay's NIP-11 max_limit
// is smaller than Limit, the REQ carries several filters over disjoint
// author sets whose limits add up to Limit; the result notes it.
func Req(o Options) (*Result, error) {
	r, err := newRunner(ScenarioReq, o)
	if err != nil {
		return nil, err
	}
	o = r.o
	r.param("limit", o.Limit)
	ri, g, perAuthor, ok := r.prepareQueries()
	if !ok {
		return r.finish(), nil
	}
	k := 1
	if ri.MaxLimit > 0 && o.Limit > ri.MaxLimit {
		k = (o.Limit + ri.MaxLimit - 1) / ri.MaxLimit
	}
	authors := g.Authors()
	if k > len(authors) {
		k = len(authors)
	}
	limits := splitLimit(o.Limit, k)
	var filters []string
	atLeast := 0
	inGroup := map[nostr.PubKey]bool{}
	for i := 0; i < k; i++ {
		lo, hi := i*len(authors)/k, (i+1)*len(authors)/k
		filters = append(filters, authorsFilter(authors[lo:hi], -1, limits[i]))
		stored := 0
		for a := lo; a < hi; a++ {
			inGroup[authors[a]] = true
			if perAuthor != nil {
				stored += perAuthor[a]
			}
		}
		atLeast += min(stored, limits[i])
	}
	shape := fmt.Sprintf(`{"kinds":[1],"authors":[<%d bench authors>],"limit":%d}`, len(authors), o.Limit)
	if k > 1 {
		shape = fmt.Sprintf(`%d filters {"kinds":[1],"authors":[<%d disjoint bench authors each>],"limit":%v}`, k, len(authors)/k, limits)
		r.res.Note("limit %d exceeds the relay's max_limit %d: each REQ carries %d filters over disjoint author sets with limits %v (together %d events)",
			o.Limit, ri.MaxLimit, k, limits, o.Limit)
	}
	match := func(ev *nostr.Event) bool { return ev.Kind == nostr.KindTextNote && inGroup[ev.PubKey] }
	r.runQueries(func(j int) query {
		id := "req" + strconv.Itoa(j)
		frame := []byte(`["REQ",`)
		frame = nostr.AppendString(frame, id)
		for _, f := range filters {
			frame = append(frame, ',')
			frame = append(frame, f...)
		}
		frame = append(frame, ']')
		return query{subID: id, frame: frame, match: match, atLeast: atLeast}
	}, shape)
	return r.finish(), nil
}

// FeedAuthors is the number of authors in a feed REQ.
const FeedAuthors = 20

// Feed fills the store, then repeats a home-timeline REQ: kind 1 by 20 of
// the bench's authors (a different deterministic choice each time),
// limit 500 (or the relay's max_limit if smaller).
func Feed(o Options) (*Result, error) {
	r, err := newRunner(ScenarioFeed, o)
	if err != nil {
		return nil, err
	}
	o = r.o
	ri, g, perAuthor, ok := r.prepareQueries()
	if !ok {
		return r.finish(), nil
	}
	limit := 500
	if ri.MaxLimit > 0 && ri.MaxLimit < limit {
		limit = ri.MaxLimit
		r.res.Note("the relay's max_limit %d is below the feed's 500: asked for %d", ri.MaxLimit, limit)
	}
	r.param("limit", limit)
	authors := g.Authors()
	n := min(FeedAuthors, len(authors))
	r.runQueries(func(j int) query {
		rng := rand.New(rand.NewPCG(o.Seed, uint64(j)))
		perm := rng.Perm(len(authors))[:n]
		pick := make([]nostr.PubKey, n)
		set := make(map[nostr.PubKey]bool, n)
		stored := 0
		for i, a := range perm {
			pick[i] = authors[a]
			set[authors[a]] = true
			if perAuthor != nil {
				stored += perAuthor[a]
			}
		}
		id := "feed" + strconv.Itoa(j)
		return query{
			subID:   id,
			frame:   subscribeFrame(id, authorsFilter(pick, -1, limit)),
			match:   func(ev *nostr.Event) bool { return ev.Kind == nostr.KindTextNote && set[ev.PubKey] },
			atLeast: min(stored, limit),
		}
	}, fmt.Sprintf(`{"kinds":[1],"authors":[<%d of the %d bench authors>],"limit":%d}`, n, len(authors), limit))
	return r.finish(), nil
}

// Search fills the store, then repeats a NIP-50 REQ {"search":<word>,
// "limit":500} with words from Vocabulary. A relay that refuses search
// (CLOSED) or ignores it (returns events without the word) fails the run
// with that said plainly.
func Search(o Options) (*Result, error) {
	r, err := newRunner(ScenarioSearch, o)
	if err != nil {
		return nil, err
	}
	o = r.o
	ri, _, _, ok := r.prepareQueries()
	if !ok {
		return r.finish(), nil
	}
	if ri.SupportedNIPs != nil && !ri.Supports(50) {
		r.res.Note("the relay's NIP-11 supported_nips does not list 50 (search)")
	}
	limit := 500
	if ri.MaxLimit > 0 && ri.MaxLimit < limit {
		limit = ri.MaxLimit
		r.res.Note("the relay's max_limit %d is below 500: asked for %d", ri.MaxLimit, limit)
	}
	r.param("limit", limit)
	r.runQueries(func(j int) query {
		word := Vocabulary[(j*37+int(o.Seed%997))%len(Vocabulary)]
		id := "search" + strconv.Itoa(j)
		f := []byte(`{"search":`)
		f = nostr.AppendString(f, word)
		f = append(f, `,"limit":`...)
		f = strconv.AppendInt(f, int64(limit), 10)
		f = append(f, '}')
		return query{subID: id, frame: subscribeFrame(id, string(f)), match: func(ev *nostr.Event) bool { return containsWord(ev, word) }}
	}, fmt.Sprintf(`{"search":"<a word from the vocabulary>","limit":%d}`, limit))
	q := r.res.Queries
	if q != nil {
		switch {
		case q.Requests > 0 && q.Closed == q.Requests:
			r.res.Failures = append([]string{fmt.Sprintf("relay refused search: every REQ was answered with CLOSED (%s)", formatCounts(r.closedSnapshot()))}, r.res.Failures...)
		case q.Closed > 0:
			r.res.Fail("%d of %d search REQs were answered with CLOSED", q.Closed, q.Requests)
		}
		switch {
		case q.EventsTotal > 0 && q.Mismatched*2 > q.EventsTotal:
			r.res.Failures = append([]string{fmt.Sprintf("relay ignores search: %d of %d returned events do not contain the searched word", q.Mismatched, q.EventsTotal)}, r.res.Failures...)
		case q.Mismatched > 0:
			r.res.Note("%d of %d returned events do not contain the searched word", q.Mismatched, q.EventsTotal)
		}
		if q.Completed > 0 && q.EventsTotal == 0 && o.Fill > 0 {
			r.res.Failures = append([]string{fmt.Sprintf("relay does not support search: %d search REQs returned no events, though the fill stored events containing every word", q.Completed)}, r.res.Failures...)
		}
	}
	return r.finish(), nil
}

// containsWord reports whether ev's content or a tag value contains word,
// ignoring case.
func containsWord(ev *nostr.Event, word string) bool {
	if strings.Contains(strings.ToLower(ev.Content), word) {
		return true
	}
	for _, t := range ev.Tags {
		for _, v := range t[min(1, len(t)):] {
			if strings.Contains(strings.ToLower(v), word) {
				return true
			}
		}
	}
	return false
}

// Failed reports whether the run has failed so far.
func (r *runner) Failed() bool { return len(r.res.Failures) > 0 }

// closedSnapshot returns a copy of the CLOSED counts.
func (r *runner) closedSnapshot() map[string]int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return copyCounts(r.closed)
}
