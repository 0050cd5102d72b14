package stream

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strings"
	gosync "sync"
	"time"

	"github.com/petrel-relay/petrel/internal/client"
	"github.com/petrel-relay/petrel/internal/nostr"
	psync "github.com/petrel-relay/petrel/internal/sync"
)

// ErrOptions means the options are inconsistent.
var ErrOptions = errors.New("stream: invalid options")

// Direction says which way a Stream moves events: psync.Down (remote to
// local), psync.Up (local to remote) or psync.Both.
type Direction = psync.Direction

// Options configure a Stream. Local, Remote and Direction are required;
// every other zero field takes the default named in its comment.
type Options struct {
	// Name names the stream in logs and Stats (petrel router: the group).
	Name string
	// Local is the ws:// URL of the local relay (petrel serve).
	Local string
	// Remote is the ws:// or wss:// URL of the relay to mirror with.
	Remote string
	// Direction is Down, Up or Both.
	Direction Direction
	// Filter selects the events mirrored. Default: all ({}). Its limit
	// is ignored; its since and until bound the catch-up as well.
	Filter nostr.Filter

	// CatchUp is how far before the moment the previous session was last
	// known alive (or before the start, for the first session) the
	// catch-up after each connection reaches, by created_at: it covers
	// events published during the outage and those that were created a
	// little earlier (clock skew, slow clients). Default 1h; negative: no
	// catch-up.
	CatchUp time.Duration
	// MinBackoff and MaxBackoff bound the pause between a failed session
	// and the next attempt, which doubles from MinBackoff up to MaxBackoff
	// (with jitter). Defaults 1s and 2m.
	MinBackoff, MaxBackoff time.Duration
	// PingInterval is how often an idle connection is pinged; one that
	// stays silent two intervals ends the session. Default 30s.
	PingInterval time.Duration
	// Timeout bounds connecting, the wait for a subscription's EOSE, and
	// each wait for an OK. Default 30s.
	Timeout time.Duration
	// Remember is the number of recently exchanged ids a session keeps to
	// suppress echoes. Default (0) 100000 (about 10 MB); negative is refused.
	Remember int
	// Window is the number of forwarded events awaiting their OK, per
	// direction. Default (0) 64; negative is refused.
	Window int
	// AuthKey, if set, answers a relay's NIP-42 challenge when it refuses
	// the live subscription, a catch-up's request or a forwarded event
	// with "auth-required:", on that connection (so again after every
	// reconnection); the request or event is then sent once more. The
	// same key serves both relays. Without it such a refusal ends Run
	// with an error matching client.ErrAuthRequired: reconnecting would
	// not help.
	AuthKey *nostr.SecretKey
	// Logger receives the stream's log lines. Default: a logger that
	// discards.
	Logger *slog.Logger
}

func (o *Options) normalize() error {
	for _, u := range []struct{ name, url string }{{"local", o.Local}, {"remote", o.Remote}} {
		if u.url == "" {
			return fmt.Errorf("%w: no %s relay", ErrOptions, u.name)
		}
		if err := client.CheckURL(u.url); err != nil {
			return fmt.Errorf("%w: %s: %w", ErrOptions, u.name, err)
		}
	}
	if o.Local == o.Remote {
		return fmt.Errorf("%w: the local and the remote relay are the same (%s)", ErrOptions, o.Local)
	}
	if o.Direction == 0 || o.Direction&^psync.Both != 0 {
		return fmt.Errorf("%w: direction %d", ErrOptions, o.Direction)
	}
	if o.Filter.Search != "" {
		return fmt.Errorf("%w: a search filter cannot be streamed", ErrOptions)
	}
	o.Filter.HasLimit, o.Filter.Limit = false, 0
	dur := func(v *time.Duration, d time.Duration) {
		if *v == 0 {
			*v = d
		}
	}
	dur(&o.CatchUp, time.Hour)
	dur(&o.MinBackoff, time.Second)
	dur(&o.MaxBackoff, 2*time.Minute)
	dur(&o.PingInterval, 30*time.Second)
	dur(&o.Timeout, 30*time.Second)
	o.MaxBackoff = max(o.MaxBackoff, o.MinBackoff)
	// Zero takes the default; a negative count is a mistake (it would
	// otherwise pass for the default too).
	if o.Remember < 0 {
		return fmt.Errorf("%w: remember %d: must not be negative", ErrOptions, o.Remember)
	}
	if o.Window < 0 {
		return fmt.Errorf("%w: window %d: must not be negative", ErrOptions, o.Window)
	}
	if o.Remember == 0 {
		o.Remember = 100000
	}
	if o.Window == 0 {
		o.Window = 64
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return nil
}

// Stats are a Stream's counters since New.
type Stats struct {
	Name      string `json:"name,omitempty"`
	Remote    string `json:"remote"`
	Direction string `json:"dir"`
	// Connected says whether a session is up now.
	Connected bool `json:"connected"`
	// Sessions counts sessions that connected; Failures attempts that
	// did not connect and sessions that ended with an error.
	Sessions int64 `json:"sessions"`
	Failures int64 `json:"failures"`
	// LastError is the error that ended the last failed attempt.
	LastError string `json:"last_error,omitempty"`
	// CatchUps counts completed catch-ups; CatchUpGaps the windows no
	// catch-up could cover (the relays refused even a one-second window,
	// or one of them lacks NIP-77).
	CatchUps    int64 `json:"catch_ups"`
	CatchUpGaps int64 `json:"catch_up_gaps"`
	// Down and Up count each direction's events.
	Down DirStats `json:"down"`
	Up   DirStats `json:"up"`
}

// DirStats count the events of one direction.
type DirStats struct {
	// Received counts live events from the source.
	Received int64 `json:"received"`
	// Echoes counts live events not forwarded because the session had
	// exchanged them already (most often: the event just sent the other
	// way, coming back).
	Echoes int64 `json:"echoes"`
	// Forwarded counts live events the target took as new; Duplicate
	// those it already had; Refused those it refused.
	Forwarded int64 `json:"forwarded"`
	Duplicate int64 `json:"duplicate"`
	Refused   int64 `json:"refused"`
	// CaughtUp counts events the catch-ups moved this way.
	CaughtUp int64 `json:"caught_up"`
}

// Stream mirrors events between the local relay and a remote one. Create
// it with New, run it with Run.
type Stream struct {
	o Options

	mu    gosync.Mutex
	stats Stats
}

// New checks o and returns a Stream.
func New(o Options) (*Stream, error) {
	if err := o.normalize(); err != nil {
		return nil, err
	}
	return &Stream{o: o, stats: Stats{Name: o.Name, Remote: o.Remote, Direction: o.Direction.String()}}, nil
}

// Stats returns a copy of the counters.
func (s *Stream) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stats
}

func (s *Stream) update(f func(st *Stats)) {
	s.mu.Lock()
	f(&s.stats)
	s.mu.Unlock()
}

func (st *Stats) dir(d Direction) *DirStats {
	if d == psync.Up {
		return &st.Up
	}
	return &st.Down
}

// healthy is how long a session must have lived for the backoff to start
// again from MinBackoff.
const healthy = time.Minute

// Run mirrors until ctx ends, reconnecting after every failure, and then
// returns nil. The one failure it does not retry is a relay requiring
// NIP-42 authentication when Options.AuthKey is nil: Run returns that
// error (matching client.ErrAuthRequired).
func (s *Stream) Run(ctx context.Context) error {
	o := &s.o
	log := o.Logger.With("stream", s.label())
	covered := time.Now() // everything before it (less CatchUp) is mirrored
	backoff := o.MinBackoff
	for {
		start := time.Now()
		next, err := s.session(ctx, covered, log)
		covered = next
		s.update(func(st *Stats) { st.Connected = false })
		if ctx.Err() != nil {
			return nil
		}
		if time.Since(start) >= healthy {
			backoff = o.MinBackoff
		}
		s.update(func(st *Stats) { st.Failures++; st.LastError = err.Error() })
		if o.AuthKey == nil && errors.Is(err, client.ErrAuthRequired) {
			log.Error("stream stopped: a relay requires NIP-42 authentication, and the stream has no key", "err", err)
			return err
		}
		wait := backoff/2 + rand.N(backoff/2+1)
		log.Warn("stream interrupted; reconnecting", "err", err, "in", wait.Round(time.Millisecond))
		select {
		case <-time.After(wait):
		case <-ctx.Done():
			return nil
		}
		backoff = min(2*backoff, o.MaxBackoff)
	}
}

// label names the stream in logs.
func (s *Stream) label() string {
	if s.o.Name != "" {
		return s.o.Name + " " + s.o.Remote
	}
	return s.o.Remote
}

// pipe is one direction of a session: a live subscription on src, a
// publisher on dst.
type pipe struct {
	dir      Direction
	src, dst *client.Conn
	filter   nostr.Filter // of the live subscription
	sub      *client.Sub
	ready    chan struct{} // closed at the subscription's EOSE
}

// session connects, catches up and forwards until a connection fails or
// ctx ends. It returns the new covered time: the moment it noticed the
// failure if its catch-up completed, covered unchanged otherwise.
func (s *Stream) session(ctx context.Context, covered time.Time, log *slog.Logger) (time.Time, error) {
	o := &s.o
	ctx, cancel := context.WithCancel(ctx)
	var conns []*client.Conn
	var wg gosync.WaitGroup
	defer func() {
		// The pipes and the catch-up stop first (an upload waits a little
		// for the OKs in flight, so that they are counted), then the
		// connections close.
		cancel()
		wg.Wait()
		for _, c := range conns {
			c.Close()
		}
	}()
	dial := func(url string) (*client.Conn, error) {
		dctx, dcancel := context.WithTimeout(ctx, o.Timeout)
		defer dcancel()
		c, err := client.Dial(dctx, url, client.Options{HandshakeTimeout: o.Timeout, PingInterval: o.PingInterval})
		if err == nil {
			conns = append(conns, c)
		}
		return c, err
	}
	rec := newRecent(o.Remember)
	live := o.Filter
	live.HasLimit, live.Limit = true, 0 // new events only

	errc := make(chan error, 2)
	var pipes []*pipe
	for _, dir := range []Direction{psync.Down, psync.Up} {
		if o.Direction&dir == 0 {
			continue
		}
		srcURL, dstURL := o.Remote, o.Local
		if dir == psync.Up {
			srcURL, dstURL = o.Local, o.Remote
		}
		p := &pipe{dir: dir, filter: live, ready: make(chan struct{})}
		var err error
		if p.src, err = dial(srcURL); err != nil {
			return covered, err
		}
		if p.dst, err = dial(dstURL); err != nil {
			return covered, err
		}
		if p.sub, err = p.src.Req("petrel-stream-"+dir.String(), p.filter); err != nil {
			return covered, err
		}
		pipes = append(pipes, p)
		wg.Go(func() { errc <- s.forward(ctx, p, rec) })
	}
	// Every subscription sees new events from its EOSE on: only then does
	// the catch-up's snapshot leave nothing between it and the live feed.
	timer := time.NewTimer(o.Timeout)
	defer timer.Stop()
	for _, p := range pipes {
		select {
		case <-p.ready:
		case err := <-errc:
			return covered, err
		case <-timer.C:
			return covered, fmt.Errorf("%s: no EOSE for the live subscription within %v", p.src.URL(), o.Timeout)
		case <-ctx.Done():
			return covered, ctx.Err()
		}
	}
	s.update(func(st *Stats) { st.Connected = true; st.Sessions++ })
	log.Info("stream connected", "dir", o.Direction.String())

	caught := make(chan error, 1)
	if o.CatchUp >= 0 {
		since := covered.Add(-o.CatchUp).Unix()
		wg.Go(func() { caught <- s.catchUp(ctx, since, rec, log) })
	} else {
		caught <- nil
	}
	done := false // the catch-up completed
	for {
		select {
		case err := <-caught:
			if err != nil {
				return covered, fmt.Errorf("catch-up: %w", err)
			}
			done = true
			s.update(func(st *Stats) { st.CatchUps++ })
		case err := <-errc:
			if done {
				covered = time.Now()
			}
			if err == nil {
				err = ctx.Err()
			}
			return covered, err
		case <-ctx.Done():
			if done {
				covered = time.Now()
			}
			return covered, ctx.Err()
		}
	}
}

// forward reads p's subscription and publishes its events to p's target
// in batches, until a connection fails (its error) or ctx ends (nil).
func (s *Stream) forward(ctx context.Context, p *pipe, rec *recent) error {
	o := &s.o
	up := psync.NewUploader(p.dst, psync.Options{Window: o.Window, Timeout: o.Timeout, AuthKey: o.AuthKey, Logger: o.Logger})
	msgs := p.sub.Messages()
	eose := false
	authed := false // p.src answered AUTH
	var batch []*nostr.Event
	// take handles one message; it returns an error that ends the pipe.
	take := func(m *nostr.RelayMessage, ok bool) error {
		if !ok {
			return p.src.Err()
		}
		switch m.Type {
		case nostr.LabelEOSE:
			if !eose {
				eose = true
				close(p.ready)
			}
		case nostr.LabelClosed:
			if client.Prefix(m.Message) != "auth-required" {
				return fmt.Errorf("%s closed the live subscription: %s", p.src.URL(), m.Message)
			}
			refusal := &client.AuthRequiredError{URL: p.src.URL(), Request: "REQ", Message: m.Message, Authenticated: authed}
			if eose || authed || o.AuthKey == nil {
				// After EOSE, events may have been missed: a new
				// session catches them up.
				return refusal
			}
			p.sub.Unsubscribe()
			if err := client.Authenticate(ctx, p.src, o.AuthKey, o.Timeout); err != nil {
				return fmt.Errorf("%s: %w", p.src.URL(), err)
			}
			authed = true
			sub, err := p.src.Req(p.sub.ID(), p.filter)
			if err != nil {
				return err
			}
			p.sub, msgs = sub, sub.Messages()
		case nostr.LabelEvent:
			ev := m.Event
			if !o.Filter.Matches(ev) {
				// The relay should not have sent it: not mirrored.
				o.Logger.Debug("event outside the filter", "stream", s.label(), "from", p.src.URL(), "id", ev.ID.Hex())
				return nil
			}
			echo := !rec.claim(ev.ID)
			s.update(func(st *Stats) {
				d := st.dir(p.dir)
				d.Received++
				if echo {
					d.Echoes++
				}
			})
			if !echo {
				batch = append(batch, ev)
			}
		}
		return nil
	}
	for {
		select {
		case m, ok := <-msgs:
			if err := take(m, ok); err != nil {
				return err
			}
		case <-p.dst.Done():
			return p.dst.Err()
		case <-ctx.Done():
			return nil
		}
	more: // what else has arrived goes in the same batch
		for len(batch) < o.Window {
			select {
			case m, ok := <-msgs:
				if err := take(m, ok); err != nil {
					return err
				}
			default:
				break more
			}
		}
		if len(batch) == 0 {
			continue
		}
		var t psync.Transfer
		err := up.Upload(ctx, batch, &t)
		s.update(func(st *Stats) {
			d := st.dir(p.dir)
			d.Forwarded += int64(t.Moved)
			d.Duplicate += int64(t.Duplicate)
			d.Refused += int64(t.RefusedTotal())
		})
		if t.RefusedTotal() > 0 {
			o.Logger.Info("events refused", "stream", s.label(), "to", p.dst.URL(), "refused", t.Refused)
		}
		batch = batch[:0]
		if err != nil {
			return err
		}
	}
}

// minWindow is the narrowest catch-up window split further when the
// relays refuse a negentropy session as too large, and maxSplits the
// most splits one catch-up makes (a window refused whatever its size
// ends as a gap, not as thousands of sessions).
const (
	minWindow = 1
	maxSplits = 64
)

// catchUp reconciles the two relays over the filter for events created
// at or after since, in the stream's directions, halving the window while
// the relays refuse it as too large.
func (s *Stream) catchUp(ctx context.Context, since int64, rec *recent, log *slog.Logger) error {
	o := &s.o
	f := o.Filter
	if !f.HasSince || f.Since < since {
		f.Since, f.HasSince = since, true
	}
	claim := func(_ psync.Direction, id nostr.ID) bool { return rec.claim(id) }
	// windows still to do, [since, until]; until -1: no upper bound
	// beyond the filter's.
	type window struct{ since, until int64 }
	until := int64(-1)
	if f.HasUntil {
		until = f.Until
	}
	todo := []window{{f.Since, until}}
	splits := 0
	for len(todo) > 0 {
		w := todo[len(todo)-1]
		todo = todo[:len(todo)-1]
		if w.until >= 0 && w.until < w.since {
			continue
		}
		wf := f
		wf.Since, wf.HasSince = w.since, true
		wf.Until, wf.HasUntil = w.until, w.until >= 0
		res, err := psync.Run(ctx, psync.Options{Remote: o.Remote, From: o.Local, Filter: wf,
			Direction: o.Direction, Window: o.Window, Timeout: o.Timeout, AuthKey: o.AuthKey, Claim: claim, Logger: o.Logger})
		s.update(func(st *Stats) {
			st.Down.CaughtUp += int64(res.Down.Moved)
			st.Up.CaughtUp += int64(res.Up.Moved)
		})
		switch {
		case err == nil:
			if res.Have+res.Need > 0 {
				log.Info("caught up", "since", w.since, "result", res.String())
			}
		case errors.Is(err, psync.ErrRefused):
			top := w.until
			if top < 0 {
				top = max(time.Now().Unix(), w.since)
			}
			// Only a "blocked:" refusal (too many events, relay busy) may
			// pass in a narrower window; restricted: and the like would
			// be refused for every one. (auth-required: is not
			// ErrRefused: Run has answered it with AUTH, or failed.)
			sized := strings.Contains(err.Error(), `NEG-ERR "blocked:`)
			if !sized || top-w.since < minWindow || splits >= maxSplits {
				log.Error("catch-up refused: events of this window published while disconnected may be missing; run petrel sync --from for it",
					"since", w.since, "until", w.until, "err", err)
				s.update(func(st *Stats) { st.CatchUpGaps++ })
				continue
			}
			splits++
			mid := w.since + (top-w.since)/2
			log.Info("catch-up window refused as too large; halving it", "since", w.since, "until", w.until, "err", err)
			todo = append(todo, window{mid + 1, w.until}, window{w.since, mid})
		case errors.Is(err, psync.ErrUnsupported):
			log.Error("no catch-up: a relay does not support NIP-77; events missed while disconnected stay missing", "err", err)
			s.update(func(st *Stats) { st.CatchUpGaps++ })
			return nil
		default:
			return err
		}
	}
	return nil
}
