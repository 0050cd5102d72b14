package postgres

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/url"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/petrel-relay/petrel/internal/nostr"
	"github.com/petrel-relay/petrel/internal/store"
	"github.com/petrel-relay/petrel/internal/store/storetest"
)

// proxy is a TCP proxy between a store's pool and the test database,
// which the test can cut (connections reset, new ones refused) or
// black-hole (connections held open, nothing forwarded).
type proxy struct {
	ln     net.Listener
	target string
	mode   atomic.Int32 // proxyUp, proxyDown, proxyHang
	mu     sync.Mutex
	conns  map[net.Conn]struct{}
	wg     sync.WaitGroup
	// cutAtCommit: the next COMMIT a client sends is forwarded, but its
	// reply is not: the server's answers are dropped from then on and,
	// once the server has had time to commit, every connection is cut.
	cutAtCommit atomic.Bool
	muted       atomic.Bool
	// downAfterCut, if set, keeps the database unreachable for that long
	// after a cut at a COMMIT.
	downAfterCut time.Duration
}

const (
	proxyUp = iota
	proxyDown
	proxyHang
)

func newProxy(t *testing.T, target string) *proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{ln: ln, target: target, conns: map[net.Conn]struct{}{}}
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(func() {
		ln.Close()
		p.closeAll()
		p.wg.Wait()
	})
	return p
}

func (p *proxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.conns == nil {
		return false
	}
	p.conns[c] = struct{}{}
	return true
}

func (p *proxy) closeAll() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for c := range p.conns {
		c.Close()
	}
	clear(p.conns)
}

func (p *proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		switch p.mode.Load() {
		case proxyDown:
			c.Close()
			continue
		case proxyHang:
			p.track(c) // held, never answered, until the mode changes
			continue
		}
		up, err := net.DialTimeout("tcp", p.target, 5*time.Second)
		if err != nil {
			c.Close()
			continue
		}
		p.track(c)
		p.track(up)
		p.wg.Add(2)
		pipe := func(dst, src net.Conn, fromClient bool) {
			defer p.wg.Done()
			buf := make([]byte, 32<<10)
			for {
				n, err := src.Read(buf)
				if n > 0 && p.mode.Load() == proxyUp && !(p.muted.Load() && !fromClient) {
					if fromClient && p.cutAtCommit.Load() && bytes.Contains(bytes.ToLower(buf[:n]), []byte("commit")) {
						p.cutAtCommit.Store(false)
						p.muted.Store(true)
						time.AfterFunc(500*time.Millisecond, func() {
							if d := p.downAfterCut; d > 0 {
								p.set(proxyDown)
								time.AfterFunc(d, func() { p.set(proxyUp) })
							} else {
								p.closeAll()
							}
							p.muted.Store(false)
						})
					}
					if _, werr := dst.Write(buf[:n]); werr != nil {
						break
					}
				}
				if err != nil {
					break
				}
			}
			dst.Close()
			src.Close()
		}
		go pipe(up, c, true)
		go pipe(c, up, false)
	}
}

// set changes the mode; cutting or black-holing ends the connections
// already open (a black hole drops their traffic from then on).
func (p *proxy) set(mode int32) {
	p.mode.Store(mode)
	if mode == proxyDown {
		p.closeAll()
	}
}

// viaProxy returns the test URL with its host replaced by the proxy's.
func viaProxy(t *testing.T, p *proxy) string {
	u, err := url.Parse(testURL())
	if err != nil || u.Host == "" {
		t.Fatalf("PETREL_TEST_POSTGRES_URL must be a postgres:// URL for this test: %q", testURL())
	}
	u.Host = p.ln.Addr().String()
	return u.String()
}

func proxyTarget(t *testing.T) string {
	u, err := url.Parse(testURL())
	if err != nil || u.Host == "" {
		t.Fatalf("PETREL_TEST_POSTGRES_URL must be a postgres:// URL for this test: %q", testURL())
	}
	if u.Port() == "" {
		return net.JoinHostPort(u.Hostname(), "5432")
	}
	return u.Host
}

// TestOutage: with the database unreachable (connections reset, or held
// without an answer) writes are Failed, never Stored, and reads fail,
// all within the configured timeouts; Stats says the database is
// unavailable; when it returns, the store works again by itself.
func TestOutage(t *testing.T) {
	needDB(t)
	p := newProxy(t, proxyTarget(t))
	s := openTest(t, Options{URL: viaProxy(t, p), ConnectTimeout: time.Second, QueryTimeout: 2 * time.Second,
		WriteTimeout: 2 * time.Second, WriteRetries: 1, MaxConns: 4, ResolveTimeout: 3 * time.Second})
	defer s.Close()
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(3, 3))
	ev := func() *nostr.Event {
		return storetest.NewEvent(rng, storetest.Key(1), 1, storetest.BaseTime, nil, "outage")
	}
	saveOK := func() {
		t.Helper()
		// The pool may hand out a connection that died with the outage:
		// the writer retries on a fresh one.
		deadline := time.Now().Add(20 * time.Second)
		for {
			res, err := s.Save(ctx, []*nostr.Event{ev()})
			if err == nil && res[0].Outcome == store.Stored {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("no recovery: Save = %v, %v", res, err)
			}
			time.Sleep(200 * time.Millisecond)
		}
		if _, err := s.Count(ctx, []nostr.Filter{{}}); err != nil {
			t.Fatalf("Count after recovery: %v", err)
		}
		if st := s.Stats(); st.Unavailable || s.Unavailable() {
			t.Fatalf("Stats after recovery: %+v (Unavailable() %v)", st, s.Unavailable())
		}
	}
	saveOK()
	for _, mode := range []int32{proxyDown, proxyHang} {
		p.set(mode)
		errs0 := s.Stats().Errors
		start := time.Now()
		e := ev()
		res, err := s.Save(ctx, []*nostr.Event{e})
		if err == nil || !errors.Is(err, ErrWrite) || res[0].Outcome != store.Failed || res[0].Err == nil {
			t.Fatalf("mode %d: Save = %+v, %v; want Failed with ErrWrite", mode, res, err)
		}
		done := make(chan store.SaveResult, 1)
		if err := s.Submit(ctx, ev(), func(r store.SaveResult) { done <- r }); err != nil {
			t.Fatal(err)
		}
		if r := <-done; r.Outcome != store.Failed || r.Err == nil {
			t.Fatalf("mode %d: Submit result %+v, want Failed", mode, r)
		}
		if _, err := s.Query(ctx, []nostr.Filter{{}}); err == nil {
			t.Fatalf("mode %d: Query succeeded with the database unreachable", mode)
		}
		if _, err := s.Count(ctx, []nostr.Filter{{}}); err == nil {
			t.Fatalf("mode %d: Count succeeded", mode)
		}
		if _, err := s.Items(ctx, []nostr.Filter{{}}, 0); err == nil {
			t.Fatalf("mode %d: Items succeeded", mode)
		}
		if _, err := s.Has(ctx, e.ID); err == nil {
			t.Fatalf("mode %d: Has succeeded", mode)
		}
		// Bounded: two write attempts and four reads, each within its
		// timeout (plus the backoff), with room for a loaded machine.
		if d := time.Since(start); d > 40*time.Second {
			t.Fatalf("mode %d: the failures took %v", mode, d)
		}
		st := s.Stats()
		if !st.Unavailable || !s.Unavailable() || st.Errors <= errs0 || st.Backend != "postgres" {
			t.Fatalf("mode %d: Stats = %+v, Unavailable() %v; want Unavailable and more Errors than %d", mode, st, s.Unavailable(), errs0)
		}
		p.set(proxyUp)
		p.closeAll() // drop the black-holed connections
		saveOK()
		// The failed event was not stored.
		if ok, err := s.Has(ctx, e.ID); err != nil || ok {
			t.Fatalf("mode %d: event of a failed Save stored: %v, %v", mode, ok, err)
		}
	}
}

// TestTerminatedBackends: the server ending the store's connections
// (pg_terminate_backend, as a restart or failover does) costs the writer
// a retry, not a failure.
func TestTerminatedBackends(t *testing.T) {
	// Its own application_name, so that only this store's backends are
	// ended, not those of the other tests and packages sharing the server.
	app := fmt.Sprintf("petrel_terminated_%d", rand.Uint64())
	u, err := url.Parse(testURL())
	if err != nil || u.Host == "" {
		t.Fatalf("PETREL_TEST_POSTGRES_URL must be a postgres:// URL for this test: %q", testURL())
	}
	q := u.Query()
	q.Set("application_name", app)
	u.RawQuery = q.Encode()
	s := openTest(t, Options{URL: u.String(), WriteRetries: 3})
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(4, 4))
	for round := 0; round < 3; round++ {
		// Fill the pool with idle connections, then end them all.
		var its []store.Iterator
		for i := 0; i < 4; i++ {
			it, err := s.Query(ctx, []nostr.Filter{{}})
			if err != nil {
				t.Fatal(err)
			}
			its = append(its, it)
		}
		for _, it := range its {
			it.Close()
		}
		admin := openTest(t, Options{})
		var n int
		err := admin.pool.QueryRow(ctx, `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
			WHERE application_name = $1 AND pid <> pg_backend_pid() AND query NOT LIKE '%pg_terminate_backend%'
			AND backend_type = 'client backend' AND datname = current_database()
			AND pid IN (SELECT pid FROM pg_stat_activity WHERE state = 'idle')`, app).Scan(&n)
		admin.Close()
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			t.Fatalf("round %d: no backend ended", round)
		}
		res, err := s.Save(ctx, []*nostr.Event{storetest.NewEvent(rng, storetest.Key(1), 1, storetest.BaseTime+int64(round), nil, "after")})
		if err != nil || res[0].Outcome != store.Stored {
			t.Fatalf("round %d (%d backends ended): Save = %+v, %v", round, n, res, err)
		}
	}
	if n, err := s.Count(ctx, []nostr.Filter{{}}); err != nil || n != 3 {
		t.Fatalf("Count = %d, %v", n, err)
	}
	// Each round's ended connections were replaced, at the cost of at
	// most one retry (none when the pool found the connection dead
	// before handing it out: it checks those idle for a second).
	if pg := s.Stats().Postgres; pg.PoolConnsOpened < 4 || pg.WriteRetries > 3 {
		t.Fatalf("after 3 rounds of ended connections: %d made, %d write retries", pg.PoolConnsOpened, pg.WriteRetries)
	}
}

// TestCommitInDoubt: the COMMIT reaches the database but its reply is lost
// with the connection. The writer must not answer Failed for events the
// database stored (a client would be told its event was refused, and it
// would never be fanned out): it asks the database what became of the
// transaction and reports the events Stored, with that transaction's
// position.
func TestCommitInDoubt(t *testing.T) {
	needDB(t)
	p := newProxy(t, proxyTarget(t))
	s := openTest(t, Options{URL: viaProxy(t, p), ConnectTimeout: time.Second, QueryTimeout: 2 * time.Second,
		WriteTimeout: 5 * time.Second, MaxConns: 4})
	defer s.Close()
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(5, 5))
	// Warm the pool, so the batch's COMMIT is the next one sent.
	if _, err := s.Save(ctx, []*nostr.Event{storetest.NewEvent(rng, storetest.Key(1), 1, storetest.BaseTime, nil, "warm")}); err != nil {
		t.Fatal(err)
	}
	var evs []*nostr.Event
	for i := 0; i < 5; i++ {
		evs = append(evs, storetest.NewEvent(rng, storetest.Key(2), 1, storetest.BaseTime+int64(i), nil, "in doubt"))
	}
	p.cutAtCommit.Store(true)
	res, err := s.Save(ctx, evs)
	if err != nil {
		t.Fatalf("Save: %v", err)
	}
	if p.cutAtCommit.Load() {
		t.Fatal("no COMMIT went through the proxy")
	}
	for i, r := range res {
		if r.Outcome != store.Stored || r.Seq == 0 {
			t.Fatalf("event %d: %+v, want Stored with a position", i, r)
		}
		if ok, err := s.Has(ctx, evs[i].ID); err != nil || !ok {
			t.Fatalf("event %d reported Stored but not in the database: %v %v", i, ok, err)
		}
	}
	if n := s.Stats().Postgres.InDoubtCommitted; n != 1 {
		t.Fatalf("%d in-doubt commits resolved as committed, want 1", n)
	}
	// The position is the committed transaction's: a query's snapshot
	// taken now includes it.
	it, err := s.Query(ctx, []nostr.Filter{{}})
	if err != nil {
		t.Fatal(err)
	}
	snap := it.Snapshot()
	it.Close()
	if !snap.Includes(res[0].Seq) {
		t.Fatalf("snapshot %+v does not include the in-doubt commit %d", snap, res[0].Seq)
	}
}

// TestCommitInDoubtLate: the same, with the database unreachable for
// longer than the writer waits: the batch is answered Failed with
// store.ErrInDoubt (the writer, and every write after it, is not held
// up), and once the database answers again the store finds the
// transaction committed and hands its events to OnLateCommit, with the
// transaction's position.
func TestCommitInDoubtLate(t *testing.T) {
	needDB(t)
	p := newProxy(t, proxyTarget(t))
	p.downAfterCut = 3 * time.Second
	type late struct {
		id  nostr.ID
		seq uint64
	}
	lateCh := make(chan late, 16)
	s := openTest(t, Options{URL: viaProxy(t, p), ConnectTimeout: time.Second, QueryTimeout: 2 * time.Second,
		WriteTimeout: 2 * time.Second, MaxConns: 4, ResolveTimeout: time.Second,
		OnLateCommit: func(ev *nostr.Event, seq uint64) { lateCh <- late{ev.ID, seq} }})
	defer s.Close()
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(6, 6))
	if _, err := s.Save(ctx, []*nostr.Event{storetest.NewEvent(rng, storetest.Key(1), 1, storetest.BaseTime, nil, "warm")}); err != nil {
		t.Fatal(err)
	}
	var evs []*nostr.Event
	for i := 0; i < 3; i++ {
		evs = append(evs, storetest.NewEvent(rng, storetest.Key(3), 1, storetest.BaseTime+int64(i), nil, "late"))
	}
	p.cutAtCommit.Store(true)
	res, err := s.Save(ctx, evs)
	if !errors.Is(err, store.ErrInDoubt) {
		t.Fatalf("Save: %v, want store.ErrInDoubt", err)
	}
	for i, r := range res {
		if r.Outcome != store.Failed || !errors.Is(r.Err, store.ErrInDoubt) {
			t.Fatalf("event %d: %+v, want Failed in doubt", i, r)
		}
	}
	got := map[nostr.ID]uint64{}
	deadline := time.After(30 * time.Second)
	for len(got) < len(evs) {
		select {
		case l := <-lateCh:
			got[l.id] = l.seq
		case <-deadline:
			t.Fatalf("%d of %d events reported late-committed", len(got), len(evs))
		}
	}
	var seq uint64
	for i, ev := range evs {
		sq, ok := got[ev.ID]
		if !ok || sq == 0 || (seq != 0 && sq != seq) {
			t.Fatalf("event %d: late commit %v at %d, want all at one position", i, ok, sq)
		}
		seq = sq
		if has, err := s.Has(ctx, ev.ID); err != nil || !has {
			t.Fatalf("event %d reported late-committed but not stored: %v %v", i, has, err)
		}
	}
	if n := s.Stats().Postgres.LateCommitted; n != int64(len(evs)) {
		t.Fatalf("LateCommitted = %d, want %d", n, len(evs))
	}
}
