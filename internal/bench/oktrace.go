package bench

import (
	"bufio"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/petrel-relay/petrel/internal/nostr"
)

// OKSplit is a ladder step's OK latency split with a petrel relay's OK
// trace (Options.OKTrace): for each event the client sent and the relay
// traced, the time from the client's send to the relay's parse of the
// EVENT (the client's write, the socket, the relay's read and handler:
// "before"), from the parse to the OK queued ("inside": the relay's
// ok_latency), and from there to the client's read of the OK ("after":
// the relay's write, the socket, the client's read). The client's and the
// relay's clocks are compared, so the split means something only with
// both on one host.
type OKSplit struct {
	// Matched: the step's events both sides timed (those whose OK the
	// relay's dispatcher queued: see relay.OKRecord). Dropped: records
	// the relay's trace dropped past its maximum.
	Matched int64 `json:"matched"`
	Dropped int64 `json:"dropped,omitempty"`
	// The 99th percentile of each part over the matched events, each
	// taken by itself.
	BeforeP99Ms float64 `json:"before_p99_ms"`
	InsideP99Ms float64 `json:"inside_p99_ms"`
	AfterP99Ms  float64 `json:"after_p99_ms"`
	// The mean of each part over the slowest 1% of the matched events
	// (by latency from send, at least one event): where the tail's time
	// went. The three sum to TailMs, their mean latency from send.
	TailMs       float64 `json:"tail_ms"`
	TailBeforeMs float64 `json:"tail_before_ms"`
	TailInsideMs float64 `json:"tail_inside_ms"`
	TailAfterMs  float64 `json:"tail_after_ms"`
}

// okTraceRec is one line of the relay's trace: Unix nanoseconds of the
// EVENT's parse and of its OK queued.
type okTraceRec struct {
	received, answered int64
}

// okTrace drives a relay's OK trace over its debug listener.
type okTrace struct {
	base string // http://host:port
	hc   *http.Client
}

func newOKTrace(base string) *okTrace {
	return &okTrace{base: strings.TrimRight(base, "/"), hc: &http.Client{Timeout: 30 * time.Second}}
}

func (t *okTrace) post(ctx context.Context, path string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, t.base+"/debug/petrel/oktrace/"+path, nil)
	if err != nil {
		return nil, err
	}
	res, err := t.hc.Do(req)
	if err != nil {
		return nil, err
	}
	if res.StatusCode/100 != 2 {
		msg, _ := io.ReadAll(io.LimitReader(res.Body, 512))
		res.Body.Close()
		return nil, fmt.Errorf("%s: %s: %s", path, res.Status, strings.TrimSpace(string(msg)))
	}
	return res, nil
}

// start starts a trace on the relay.
func (t *okTrace) start(ctx context.Context) error {
	res, err := t.post(ctx, "start")
	if err != nil {
		return err
	}
	res.Body.Close()
	return nil
}

// stop ends the relay's trace and returns its records by event id and
// how many it dropped.
func (t *okTrace) stop(ctx context.Context) (map[nostr.ID]okTraceRec, int64, error) {
	res, err := t.post(ctx, "stop")
	if err != nil {
		return nil, 0, err
	}
	defer res.Body.Close()
	return parseOKTrace(res.Body)
}

// parseOKTrace reads the relay's trace: a header line, then "id received
// verified committed answered" a line.
func parseOKTrace(r io.Reader) (map[nostr.ID]okTraceRec, int64, error) {
	sc := bufio.NewScanner(r)
	if !sc.Scan() {
		return nil, 0, fmt.Errorf("oktrace: empty answer: %v", sc.Err())
	}
	head := sc.Text()
	const prefix = "# petrel oktrace v1:"
	var n, dropped int64
	if !strings.HasPrefix(head, prefix) {
		return nil, 0, fmt.Errorf("oktrace: not a petrel OK trace (first line %q)", head)
	}
	if _, err := fmt.Sscanf(head[strings.LastIndex(head, "; ")+2:], "records %d dropped %d", &n, &dropped); err != nil {
		return nil, 0, fmt.Errorf("oktrace: header %q: %v", head, err)
	}
	if n < 0 || dropped < 0 {
		return nil, 0, fmt.Errorf("oktrace: header %q: negative count", head)
	}
	recs := make(map[nostr.ID]okTraceRec, min(n, 1<<16))
	line := 1
	for sc.Scan() {
		line++
		f := strings.Fields(sc.Text())
		if len(f) != 5 {
			return nil, 0, fmt.Errorf("oktrace: line %d: want 5 fields, got %d", line, len(f))
		}
		id, err := nostr.ParseID(f[0])
		if err != nil {
			return nil, 0, fmt.Errorf("oktrace: line %d: %v", line, err)
		}
		rcv, err1 := strconv.ParseInt(f[1], 10, 64)
		ans, err2 := strconv.ParseInt(f[4], 10, 64)
		if err := errors.Join(err1, err2); err != nil {
			return nil, 0, fmt.Errorf("oktrace: line %d: %v", line, err)
		}
		recs[id] = okTraceRec{received: rcv, answered: ans}
	}
	if err := sc.Err(); err != nil {
		return nil, 0, fmt.Errorf("oktrace: %v", err)
	}
	if read := int64(line - 1); read != n {
		return nil, 0, fmt.Errorf("oktrace: the header promised %d records, read %d", n, read)
	}
	return recs, dropped, nil
}

// splitOKs splits the latency of events lo..hi-1 with the relay's
// records. index finds an event's position by id (EventSet.Index),
// sentAt and okAt give its actual send time and its OK's arrival, as
// Unix nanoseconds of the client's clock (0: not sent, or no OK). Nil
// when no event matched.
func splitOKs(index func(nostr.ID) (int, bool), sentAt, okAt func(i int) int64, lo, hi int, recs map[nostr.ID]okTraceRec) *OKSplit {
	type part struct {
		i                            int
		total, before, inside, after int64
	}
	var ps []part
	for id, rec := range recs {
		i, ok := index(id)
		if !ok || i < lo || i >= hi {
			continue
		}
		s, o := sentAt(i), okAt(i)
		if s == 0 || o == 0 {
			continue
		}
		ps = append(ps, part{i: i, total: o - s, before: rec.received - s, inside: rec.answered - rec.received, after: o - rec.answered})
	}
	if len(ps) == 0 {
		return nil
	}
	p99 := func(get func(part) int64) float64 {
		v := make([]int64, len(ps))
		for i, p := range ps {
			v[i] = get(p)
		}
		slices.Sort(v)
		return float64(v[NearestRank(99, len(v))-1]) / 1e6
	}
	sp := &OKSplit{
		Matched:     int64(len(ps)),
		BeforeP99Ms: p99(func(p part) int64 { return p.before }),
		InsideP99Ms: p99(func(p part) int64 { return p.inside }),
		AfterP99Ms:  p99(func(p part) int64 { return p.after }),
	}
	slices.SortFunc(ps, func(a, b part) int { return cmp.Or(cmp.Compare(a.total, b.total), cmp.Compare(a.i, b.i)) })
	tail := ps[len(ps)-max(1, len(ps)/100):]
	var sum part
	for _, p := range tail {
		sum.total += p.total
		sum.before += p.before
		sum.inside += p.inside
		sum.after += p.after
	}
	n := float64(len(tail)) * 1e6
	sp.TailMs, sp.TailBeforeMs, sp.TailInsideMs, sp.TailAfterMs = float64(sum.total)/n, float64(sum.before)/n, float64(sum.inside)/n, float64(sum.after)/n
	return sp
}
