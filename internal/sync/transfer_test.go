package sync

import (
	"context"
	"errors"
	"strings"
	gosync "sync"
	"testing"
	"time"

	"github.com/petrel-relay/petrel/internal/client"
	"github.com/petrel-relay/petrel/internal/nostr"
)

// testSyncer returns a syncer with normalized options and a connection
// to url.
func testSyncer(t *testing.T, url string, o Options) (*syncer, *client.Conn) {
	t.Helper()
	o.Remote = url
	o.Store = modelWith(t)
	if err := o.normalize(); err != nil {
		t.Fatal(err)
	}
	c, err := client.Dial(context.Background(), url, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return &syncer{o: o, remote: c, backoff: time.Millisecond}, c
}

// TestUploadOutcomes: uploads are counted by the remote's answer;
// "rate-limited:" is retried after a pause until accepted or out of
// retries; the window bounds the events awaiting an OK.
func TestUploadOutcomes(t *testing.T) {
	t.Parallel()
	events := signed("upload", 90, 1, base, 1)
	fr := newFakeRelay(t, "notice", "", nil)
	var mu gosync.Mutex
	attempts := map[nostr.ID]int{}
	index := map[nostr.ID]int{}
	for i, ev := range events {
		index[ev.ID] = i
	}
	fr.onEvent = func(ev *nostr.Event) (bool, string) {
		mu.Lock()
		defer mu.Unlock()
		attempts[ev.ID]++
		switch i := index[ev.ID]; {
		case i%10 == 0:
			return false, "rate-limited: always"
		case i%10 == 1 && attempts[ev.ID] <= 2:
			return false, "rate-limited: slow down"
		case i%10 == 2:
			return false, "blocked: not here"
		case i%10 == 3:
			return true, "duplicate: have it"
		case i%10 == 4:
			return false, "weird"
		}
		return true, ""
	}
	s, c := testSyncer(t, fr.URL, Options{Window: 4, MaxRetries: 3})
	var tr Transfer
	if err := (&relaySink{s: s, c: c}).put(context.Background(), events, &tr); err != nil {
		t.Fatal(err)
	}
	if tr.Moved != 54 || tr.Duplicate != 9 || tr.Refused["rate-limited"] != 9 || tr.Refused["blocked"] != 9 || tr.Refused["other"] != 9 {
		t.Fatalf("%+v", tr)
	}
	for id, n := range attempts {
		switch i := index[id]; {
		case i%10 == 0 && n != 4, i%10 == 1 && n != 3, i%10 > 1 && n != 1:
			t.Fatalf("event %d tried %d times", i, n)
		}
	}
}

// TestUploadNoOK: a remote that never answers makes the upload fail after
// Timeout, counting the events in flight.
func TestUploadNoOK(t *testing.T) {
	t.Parallel()
	fr := newFakeRelay(t, "notice", "", nil)
	block := make(chan struct{})
	t.Cleanup(func() { close(block) })
	fr.onEvent = func(ev *nostr.Event) (bool, string) { <-block; return true, "" }
	s, c := testSyncer(t, fr.URL, Options{Window: 4, Timeout: 200 * time.Millisecond})
	var tr Transfer
	err := (&relaySink{s: s, c: c}).put(context.Background(), signed("upload", 10, 1, base, 1), &tr)
	if err == nil || !strings.Contains(err.Error(), "no OK") || tr.Refused["timeout"] != 4 {
		t.Fatalf("%v %+v", err, tr)
	}
}

// TestDownloadChecks: downloaded events with a bad signature or an id
// that does not match their content are dropped and counted; ids the
// remote does not return are counted missing.
func TestDownloadChecks(t *testing.T) {
	t.Parallel()
	good := signed("checks", 5, 1, base, 1)
	badSig := *signed("checks-sig", 1, 1, base, 1)[0]
	badSig.Sig[10] ^= 1
	badSig.Raw = nostr.Serialize(&badSig)
	badID := *signed("checks-id", 1, 1, base, 1)[0]
	badID.Content = "changed"
	badID.Raw = nostr.Serialize(&badID)
	fr := newFakeRelay(t, "notice", "", append(good[:4:4], &badSig, &badID))
	s, c := testSyncer(t, fr.URL, Options{})
	var tr Transfer
	ids := []nostr.ID{good[0].ID, good[1].ID, good[2].ID, good[3].ID, good[4].ID, badSig.ID, badID.ID}
	got, err := (&relaySource{s: s, c: c, inf: &client.Info{}}).fetch(context.Background(), ids, &tr)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 4 || tr.Invalid != 2 || tr.Missing != 1 {
		t.Fatalf("%d events, %+v", len(got), tr)
	}
}

// TestChunkSizes: REQs by ids respect the remote's max_limit and
// max_message_length.
func TestChunkSizes(t *testing.T) {
	t.Parallel()
	f := func(perReq, maxLimit, maxMsg, want int) {
		t.Helper()
		s := &syncer{o: Options{IDsPerReq: perReq}}
		var inf client.Info
		inf.Limitation.MaxLimit, inf.Limitation.MaxMessageLength = maxLimit, maxMsg
		if got := (&relaySource{s: s, inf: &inf}).chunk(); got != want {
			t.Fatalf("chunk(%d, %d, %d) = %d, want %d", perReq, maxLimit, maxMsg, got, want)
		}
		if fl := (&syncer{o: Options{FrameLimit: 60000}}).frameLimit(&inf); maxMsg > 0 && 2*fl > maxMsg && fl > 4096 {
			t.Fatalf("frame limit %d for max_message_length %d", fl, maxMsg)
		}
	}
	f(500, 0, 0, 500)
	f(500, 100, 0, 100)
	f(500, 0, 16384, 241)
	f(500, 0, 100, 1)
	f(50, 5000, 131072, 50)
}

// instantSource hands out empty chunks of one id at once, ignoring ctx.
type instantSource struct{}

func (instantSource) chunk() int { return 1 }
func (instantSource) fetch(context.Context, []nostr.ID, *Transfer) ([]*nostr.Event, error) {
	return nil, nil
}

// cancellingSink cancels the run's context at its first put and
// succeeds.
type cancellingSink struct{ cancel context.CancelFunc }

func (s cancellingSink) put(context.Context, []*nostr.Event, *Transfer) error {
	s.cancel()
	return nil
}

// TestTransferCancelled: a transfer whose context ends before its
// fetcher has handed over every chunk reports the cancellation, not
// success (the fetcher used to stop quietly, and a cancelled sync then
// looked complete).
func TestTransferCancelled(t *testing.T) {
	t.Parallel()
	s := &syncer{}
	ids := make([]nostr.ID, 10000)
	for range 20 {
		ctx, cancel := context.WithCancel(context.Background())
		err := s.transfer(ctx, "test", ids, instantSource{}, cancellingSink{cancel}, &Transfer{})
		cancel()
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("cancelled transfer returned %v, want context.Canceled", err)
		}
	}
}
