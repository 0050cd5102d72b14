package sync

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	gosync "sync"
	"time"

	"github.com/petrel-relay/petrel/internal/client"
	"github.com/petrel-relay/petrel/internal/negentropy"
	"github.com/petrel-relay/petrel/internal/nostr"
)

// syncer is the state of one Run.
type syncer struct {
	o      Options
	res    Result
	remote *client.Conn
	from   *client.Conn // nil unless Options.From
	rinfo  client.Info  // the remote's NIP-11 (zero when unknown)
	finfo  client.Info  // the From relay's
	subSeq int
	// backoff replaces minBackoff (and scales maxBackoff) in tests.
	backoff time.Duration

	authMu gosync.Mutex
	authed map[*client.Conn]bool // the connections that answered AUTH
}

// Run syncs as o says and returns what it did. The Result is filled in as
// far as Run got, also when it returns an error: whatever was saved or
// uploaded stays, and a later Run carries on from there.
func Run(ctx context.Context, o Options) (Result, error) {
	start := time.Now()
	if err := o.normalize(); err != nil {
		return Result{}, err
	}
	s := &syncer{o: o}
	err := s.run(ctx)
	if p := s.o.Progress; p != nil {
		p.Done()
	}
	for _, c := range []*client.Conn{s.remote, s.from} {
		if c != nil {
			c.Close()
			st := c.Stats()
			s.res.Sent += st.Sent
			s.res.Received += st.Received
		}
	}
	s.res.Elapsed = time.Since(start)
	return s.res, err
}

func (s *syncer) run(ctx context.Context) error {
	o := &s.o
	var err error
	if s.remote, s.rinfo, err = s.connect(ctx, o.Remote); err != nil {
		return err
	}
	if o.From != "" {
		if s.from, s.finfo, err = s.connect(ctx, o.From); err != nil {
			return err
		}
		return s.runBridge(ctx)
	}

	have, need, err := s.reconcileStore(ctx)
	if err != nil {
		if (errors.Is(err, ErrUnsupported) || errors.Is(err, ErrRefused)) && o.FallbackPaging {
			if o.Direction != Down {
				return fmt.Errorf("%w; the fallback paging only downloads: run it with direction down", err)
			}
			o.Logger.Info("falling back to paging through the relay with REQ", "reason", err)
			return s.pageThrough(ctx)
		}
		return err
	}
	if o.Direction&Down != 0 {
		s.res.Down.Wanted = len(need)
		src := &relaySource{s: s, c: s.remote, inf: &s.rinfo}
		if err := s.transfer(ctx, "download", need, src, &storeSink{s: s}, &s.res.Down); err != nil {
			return err
		}
	}
	if o.Direction&Up != 0 {
		s.res.Up.Wanted = len(have)
		if err := s.transfer(ctx, "upload", have, &storeSource{s: s}, &relaySink{s: s, c: s.remote}, &s.res.Up); err != nil {
			return err
		}
	}
	return nil
}

// infoTimeout bounds the request for a relay's NIP-11 document.
const infoTimeout = 5 * time.Second

// connect connects to the relay at url and reads its NIP-11 document (a
// relay without one gets the zero Info: no known limits). The connection
// comes first: a relay that cannot be reached is said once, by its error.
func (s *syncer) connect(ctx context.Context, url string) (*client.Conn, client.Info, error) {
	c, err := client.Dial(ctx, url, client.Options{})
	if err != nil {
		return nil, client.Info{}, err
	}
	ictx, cancel := context.WithTimeout(ctx, infoTimeout)
	inf, ierr := client.FetchInfo(ictx, nil, url)
	cancel()
	if ierr != nil {
		s.o.Logger.Info("no NIP-11 document: using default limits", "relay", url, "err", ierr)
	}
	return c, inf, nil
}

// runBridge syncs two relays: it reconciles their sets with a
// negentropy session on each, passing each relay's range descriptions to
// the other (negentropy.Bridge), and moves the difference.
func (s *syncer) runBridge(ctx context.Context) error {
	o := &s.o
	s.res.Mode = ModeBridge
	t0 := time.Now()
	s.phase("reconcile", -1)
	beforeF, beforeR := s.from.Stats(), s.remote.Stats()
	have, need, err := s.bridge(ctx)
	s.countReconcile(s.from, beforeF)
	s.countReconcile(s.remote, beforeR)
	s.res.ReconcileTime = time.Since(t0)
	if err != nil {
		return err
	}
	s.res.Have, s.res.Need = len(have), len(need)
	if o.Direction&Down != 0 {
		s.res.Down.Wanted = len(need)
		src := &relaySource{s: s, c: s.remote, inf: &s.rinfo}
		if err := s.transfer(ctx, "download", need, src, &relaySink{s: s, c: s.from}, &s.res.Down); err != nil {
			return err
		}
	}
	if o.Direction&Up != 0 {
		s.res.Up.Wanted = len(have)
		src := &relaySource{s: s, c: s.from, inf: &s.finfo}
		if err := s.transfer(ctx, "upload", have, src, &relaySink{s: s, c: s.remote}, &s.res.Up); err != nil {
			return err
		}
	}
	return nil
}

// bridge runs the two negentropy sessions of runBridge (side A: the From
// relay, side B: the remote) and returns the ids only each one holds.
func (s *syncer) bridge(ctx context.Context) (onlyFrom, onlyRemote []nostr.ID, err error) {
	type side struct {
		c      *client.Conn
		sub    *client.Sub
		first  []byte // the NEG-OPEN message, until its answer has come
		opened bool   // its answer to NEG-OPEN has come
	}
	sides := [2]*side{{c: s.from}, {c: s.remote}}
	br, err := negentropy.NewBridge(min(s.frameLimit(&s.finfo), s.frameLimit(&s.rinfo)))
	if err != nil {
		return nil, nil, err
	}
	defer func() {
		for _, sd := range sides {
			if sd.sub != nil {
				_ = sd.sub.Close() // NEG-CLOSE, also when the session failed
			}
		}
	}()
	for !br.Done() {
		var waiting []negentropy.Side
		for i, sd := range sides {
			msg := br.Next(negentropy.Side(i))
			if msg == nil {
				continue
			}
			if sd.sub == nil {
				sd.first = msg
				if sd.sub, err = s.negOpen(sd.c, msg); err != nil {
					return nil, nil, err
				}
			} else if err := sd.c.NegMsg(sd.sub.ID(), msg); err != nil {
				return nil, nil, err
			}
			waiting = append(waiting, negentropy.Side(i))
		}
		if len(waiting) == 0 {
			panic("BUG: sync: negentropy bridge has nothing to send and is not done")
		}
		// Both answers are awaited at once: the second wait costs nothing
		// once the first is in.
		for _, i := range waiting {
			sd := sides[i]
			var reply []byte
			if sd.opened {
				reply, err = s.awaitNeg(ctx, sd.c, sd.sub, false)
			} else {
				sd.sub, reply, err = s.awaitOpen(ctx, sd.c, sd.sub, sd.first)
			}
			if err != nil {
				if !namesRelay(err) {
					err = fmt.Errorf("%s: %w", sd.c.URL(), err)
				}
				return nil, nil, err
			}
			sd.opened, sd.first = true, nil
			oa, ob, err := br.Reply(i, reply)
			if errors.Is(err, negentropy.ErrUnsupportedVersion) {
				return nil, nil, fmt.Errorf("%w: %s speaks another negentropy version (%v)", ErrUnsupported, sd.c.URL(), err)
			}
			if err != nil {
				return nil, nil, fmt.Errorf("negentropy with %s: %w", sd.c.URL(), err)
			}
			s.res.Rounds++
			if s.o.Progress != nil {
				s.o.Progress.Add(1)
			}
			for _, id := range oa {
				onlyFrom = append(onlyFrom, id)
			}
			for _, id := range ob {
				onlyRemote = append(onlyRemote, id)
			}
		}
	}
	return onlyFrom, onlyRemote, nil
}

// countReconcile adds what c sent and received since before to the
// reconciliation's bytes.
func (s *syncer) countReconcile(c *client.Conn, before client.Stats) {
	after := c.Stats()
	s.res.ReconcileSent += after.Sent - before.Sent
	s.res.ReconcileReceived += after.Received - before.Received
}

// reconcileStore reconciles the local store's items with the remote.
func (s *syncer) reconcileStore(ctx context.Context) (have, need []nostr.ID, err error) {
	s.res.Mode = ModeNegentropy
	t0 := time.Now()
	items, err := s.o.Store.Items(ctx, []nostr.Filter{s.o.Filter}, 0)
	if err != nil {
		return nil, nil, fmt.Errorf("read local items: %w", err)
	}
	s.res.LocalItems = len(items)
	vitems := make([]negentropy.Item, len(items))
	for i := range items {
		vitems[i] = negentropy.Item{Timestamp: uint64(items[i].CreatedAt), ID: items[i].ID}
	}
	items = nil
	s.phase("reconcile", -1)
	c := s.remote
	before := c.Stats()
	haveSet, needSet, err := s.reconcile(ctx, c, &s.rinfo, vitems)
	s.countReconcile(c, before)
	s.res.ReconcileTime = time.Since(t0)
	if err != nil {
		return nil, nil, err
	}
	for id := range haveSet {
		have = append(have, id)
	}
	for id := range needSet {
		need = append(need, id)
	}
	s.res.Have, s.res.Need = len(have), len(need)
	return have, need, nil
}

// frameLimit is the negentropy frame size limit for messages to a relay.
func (s *syncer) frameLimit(inf *client.Info) int {
	l := s.o.FrameLimit
	if m := inf.Limitation.MaxMessageLength; m > 0 {
		l = min(l, (m-200)/2)
	}
	return max(l, negentropy.MinFrameSizeLimit)
}

// nextSubID returns a fresh subscription id.
func (s *syncer) nextSubID(kind string) string {
	s.subSeq++
	return "petrel-" + kind + "-" + strconv.Itoa(s.subSeq)
}

// reconcile runs one negentropy session with c over items (nil: an empty
// set) and returns the ids this side has and needs.
func (s *syncer) reconcile(ctx context.Context, c *client.Conn, inf *client.Info, items []negentropy.Item) (have, need map[nostr.ID]struct{}, err error) {
	o := &s.o
	v, err := negentropy.NewVector(items)
	if err != nil {
		return nil, nil, err
	}
	n, err := negentropy.New(v, s.frameLimit(inf))
	if err != nil {
		return nil, nil, err
	}
	msg, err := n.Initiate()
	if err != nil {
		return nil, nil, err
	}
	sub, err := s.negOpen(c, msg)
	if err != nil {
		return nil, nil, err
	}
	sub, reply, err := s.awaitOpen(ctx, c, sub, msg)
	if err != nil {
		return nil, nil, err
	}
	defer sub.Close() // NEG-CLOSE, also when the session failed

	have, need = make(map[nostr.ID]struct{}), make(map[nostr.ID]struct{})
	for round := 1; ; round++ {
		if round > 1 {
			if reply, err = s.awaitNeg(ctx, c, sub, false); err != nil {
				return nil, nil, err
			}
		}
		next, h, nd, err := n.ReconcileClient(reply)
		if errors.Is(err, negentropy.ErrUnsupportedVersion) {
			return nil, nil, fmt.Errorf("%w: it speaks another negentropy version (%v)", ErrUnsupported, err)
		}
		if err != nil {
			return nil, nil, fmt.Errorf("negentropy round %d with %s: %w", round, c.URL(), err)
		}
		s.res.Rounds++
		if o.Progress != nil {
			o.Progress.Add(1)
		}
		for _, x := range h {
			have[x] = struct{}{}
		}
		for _, x := range nd {
			need[x] = struct{}{}
		}
		if next == nil {
			break
		}
		if err := c.NegMsg(sub.ID(), next); err != nil {
			return nil, nil, err
		}
	}
	if err := sub.Close(); err != nil {
		return nil, nil, err
	}
	return have, need, nil
}

// negOpen opens a negentropy session on c with the initiator's first
// message msg.
func (s *syncer) negOpen(c *client.Conn, msg []byte) (*client.Sub, error) {
	drainInbox(c) // a NOTICE from before is no answer to this NEG-OPEN
	return c.NegOpen(s.nextSubID("neg"), &s.o.Filter, msg)
}

// awaitOpen waits for the answer to the NEG-OPEN of sub, sent with the
// message first. A refusal "auth-required:" is answered with AUTH
// (Options.AuthKey) and the session opened once more. It returns the
// session's Sub (a new one after an AUTH) and the answer; on an error the
// session is closed.
func (s *syncer) awaitOpen(ctx context.Context, c *client.Conn, sub *client.Sub, first []byte) (*client.Sub, []byte, error) {
	for {
		reply, err := s.awaitNeg(ctx, c, sub, true)
		if err == nil {
			return sub, reply, nil
		}
		_ = sub.Close()
		if !isAuthRequired(err) {
			return nil, nil, err
		}
		if err := s.authenticate(ctx, c, err); err != nil {
			return nil, nil, err
		}
		if sub, err = s.negOpen(c, first); err != nil {
			return nil, nil, err
		}
	}
}

// drainInbox empties c's inbox of what arrived unasked so far.
func drainInbox(c *client.Conn) {
	for {
		select {
		case _, ok := <-c.Inbox():
			if !ok {
				return
			}
		default:
			return
		}
	}
}

// awaitNeg waits for the next NEG-MSG of a session. For the answer to
// NEG-OPEN (first), anything but a NEG-MSG within OpenTimeout means the
// remote does not do NIP-77 here.
func (s *syncer) awaitNeg(ctx context.Context, c *client.Conn, sub *client.Sub, first bool) ([]byte, error) {
	wait := s.o.Timeout
	if first {
		wait = s.o.OpenTimeout
	}
	timer := time.NewTimer(wait)
	defer timer.Stop()
	for {
		select {
		case m, ok := <-sub.Messages():
			if !ok {
				return nil, c.Err()
			}
			switch m.Type {
			case nostr.LabelNegMsg:
				return m.NegPayload, nil
			case nostr.LabelNegErr:
				if first && client.Prefix(m.Message) == "auth-required" {
					return nil, s.authRefusal(c, "NEG-OPEN", m.Message)
				}
				if first {
					return nil, fmt.Errorf("%w: NEG-ERR %q", ErrRefused, m.Message)
				}
				return nil, fmt.Errorf("%s ended the negentropy session: %s", c.URL(), m.Message)
			case nostr.LabelClosed:
				if first && client.Prefix(m.Message) == "auth-required" {
					return nil, s.authRefusal(c, "NEG-OPEN", m.Message)
				}
				if first {
					return nil, fmt.Errorf("%w: it answered NEG-OPEN with CLOSED %q", ErrUnsupported, m.Message)
				}
				return nil, fmt.Errorf("%s closed the negentropy session: %s", c.URL(), m.Message)
			}
		case m, ok := <-c.Inbox():
			if !ok {
				return nil, c.Err()
			}
			if m.Relay == nil || m.Relay.Type != nostr.LabelNotice {
				continue // not an answer to this session
			}
			if first {
				return nil, fmt.Errorf("%w: it answered NEG-OPEN with NOTICE %q", ErrUnsupported, m.Relay.Message)
			}
			s.o.Logger.Warn("notice", "relay", c.URL(), "message", m.Relay.Message)
		case <-timer.C:
			if first {
				return nil, fmt.Errorf("%w: no answer to NEG-OPEN within %v", ErrUnsupported, wait)
			}
			return nil, fmt.Errorf("%s: no negentropy answer within %v", c.URL(), wait)
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

func (s *syncer) phase(name string, total int64) {
	if p := s.o.Progress; p != nil {
		p.Done()
		p.Phase(name, total)
	}
}
