package importer

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"testing/iotest"
	"time"

	"github.com/petrel-relay/petrel/internal/bench"
	"github.com/petrel-relay/petrel/internal/nostr"
	"github.com/petrel-relay/petrel/internal/relaytest"
	"github.com/petrel-relay/petrel/internal/store"
	"github.com/petrel-relay/petrel/internal/store/pebble"
	"github.com/petrel-relay/petrel/internal/store/storetest"
)

// fixture is a JSONL input with every kind of line import meets, the
// counts it must give, and the lines it must report.
type fixture struct {
	data      []byte
	want      Counts
	errLines  []int64
	remaining int64 // events in the store afterwards
}

func newFixture() fixture {
	k1, k2 := relaytest.NewKey("import-a"), relaytest.NewKey("import-b")
	note := func(i int) *nostr.Event { return k1.Event(1, fmt.Sprintf("note %d", i), nil, fixtureBase+int64(i)) }
	var lines []string
	add := func(s string) { lines = append(lines, s) }
	for i := range 20 { // lines 1-20
		add(string(note(i).Raw))
	}
	add("")                                              // 21 blank
	add(string(note(0).Raw))                             // 22 duplicate
	add(`["EVENT", ` + string(note(20).Raw) + `]`)       // 23 client envelope
	add(`["EVENT","sub1",` + string(note(21).Raw) + `]`) // 24 relay envelope
	add(`["EOSE","sub1"]`)                               // 25 message
	add(`["NOTICE","hello"]`)                            // 26 message
	add(`not json`)                                      // 27 invalid
	add(`{"id":"abc"}`)                                  // 28 invalid
	bad := note(22)                                      //
	badSig := strings.Replace(string(bad.Raw), bad.Sig.Hex(), flipLast(bad.Sig.Hex()), 1)
	add(badSig) // 29 bad signature
	tampered := *note(23)
	tampered.Content, tampered.Raw = "tampered", nil
	add(string(nostr.Serialize(&tampered)))                                                      // 30 bad id
	add(string(k1.Event(20001, "typing", nil, fixtureBase).Raw))                                 // 31 ephemeral
	add(string(k1.Event(1, "gone", nostr.Tags{{"expiration", "1000"}}, fixtureBase).Raw))        // 32 expired
	add(string(k1.Event(0, `{"name":"v2"}`, nil, fixtureBase+100).Raw))                          // 33 profile, stored
	add(string(k1.Event(0, `{"name":"v1"}`, nil, fixtureBase+50).Raw))                           // 34 older: superseded
	add(string(k1.Event(5, "", nostr.Tags{{"e", note(1).ID.Hex()}}, fixtureBase+300).Raw))       // 35 deletes line 2
	add(string(note(1).Raw))                                                                     // 36 deleted
	add(string(k2.Event(62, "", nostr.Tags{{"relay", "wss://other.example"}}, fixtureBase).Raw)) // 37 vanish elsewhere
	add(string(note(24).Raw) + "\r")                                                             // 38 CRLF
	add("   \t")                                                                                 // 39 blank
	add(`{"content":"` + strings.Repeat("x", 5000) + `"}`)                                       // 40 too long
	add(string(note(25).Raw))                                                                    // 41, no final newline
	return fixture{
		data: []byte(strings.Join(lines, "\n")),
		want: Counts{
			Lines: 41, Blank: 2, Messages: 2, Events: 34,
			Stored: 26, Duplicate: 1, Superseded: 1, Deleted: 1, Removed: 1,
			Ephemeral: 1, Expired: 1, VanishElsewhere: 1,
			Invalid: 3, BadID: 1, BadSig: 1,
		},
		errLines:  []int64{27, 28, 29, 30, 40},
		remaining: 25,
	}
}

func flipLast(s string) string {
	last := s[len(s)-1]
	if last == '0' {
		return s[:len(s)-1] + "1"
	}
	return s[:len(s)-1] + "0"
}

func errLines(errs []LineError) []int64 {
	out := make([]int64, len(errs))
	for i, e := range errs {
		out[i] = e.Line
	}
	return out
}

func TestRun(t *testing.T) {
	fx := newFixture()
	f := func(name string, o Options, want Counts, wantErrs []int64) {
		t.Helper()
		st := openStore(t)
		o.MaxLine = 4096
		o.MaxErrors = 10
		res, err := Run(context.Background(), st, bytes.NewReader(fx.data), o)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if res.Counts != want {
			t.Fatalf("%s: counts\n got %+v\nwant %+v", name, res.Counts, want)
		}
		if got := errLines(res.Errors); fmt.Sprint(got) != fmt.Sprint(wantErrs) {
			t.Fatalf("%s: error lines %v, want %v (%+v)", name, got, wantErrs, res.Errors)
		}
		// A line's reason is told without the parser's package prefix.
		for _, e := range res.Errors {
			if e.Line == 28 && e.Err != "id must be 64 lowercase hex characters" {
				t.Fatalf("%s: line 28's reason %q", name, e.Err)
			}
		}
		if res.Bytes != int64(len(fx.data)) {
			t.Fatalf("%s: %d bytes read, want %d", name, res.Bytes, len(fx.data))
		}
		n, err := st.Count(context.Background(), []nostr.Filter{{}})
		if err != nil {
			t.Fatal(err)
		}
		if n != want.Stored-want.Removed {
			t.Fatalf("%s: %d events in the store, want %d", name, n, want.Stored-want.Removed)
		}
	}
	f("verify", Options{}, fx.want, fx.errLines)
	f("one worker, batches of 3", Options{Workers: 1, Batch: 3}, fx.want, fx.errLines)

	// Without verification the bad signature is stored.
	noVerify := fx.want
	noVerify.BadSig--
	noVerify.Stored++
	f("no-verify", Options{NoVerify: true}, noVerify, []int64{27, 28, 30, 40})

	// The request to vanish is for this relay when relay.url says so.
	ours := fx.want
	ours.VanishElsewhere--
	ours.Stored++
	f("own url", Options{OwnURL: ownURL(t, "WSS://Other.Example:443/")}, ours, fx.errLines)

	// MaxErrors bounds the list, keeping the first lines.
	st := openStore(t)
	res, err := Run(context.Background(), st, bytes.NewReader(fx.data), Options{MaxLine: 4096, MaxErrors: 2})
	if err != nil || fmt.Sprint(errLines(res.Errors)) != "[27 28]" {
		t.Fatalf("MaxErrors 2: %v %+v", err, res.Errors)
	}
	if fx.remaining != int64(len(storedRaws(t, st))) {
		t.Fatalf("store holds %d events, want %d", len(storedRaws(t, st)), fx.remaining)
	}
}

// TestRunOrder: chunks are checked in parallel but saved in file order.
// 600 versions of one replaceable event, oldest first, across several
// chunks and many batches, must each replace the previous one.
func TestRunOrder(t *testing.T) {
	k := relaytest.NewKey("import-order")
	var b strings.Builder
	const n = 600
	for i := range n {
		if i == 399 {
			b.WriteString("garbage\n") // line 400
		}
		b.Write(k.Event(0, fmt.Sprintf(`{"name":"v%d"}`, i), nil, fixtureBase+int64(i)).Raw)
		b.WriteByte('\n')
	}
	st := openStore(t)
	res, err := Run(context.Background(), st, strings.NewReader(b.String()), Options{Workers: 3, Batch: 7, MaxErrors: 5})
	if err != nil {
		t.Fatal(err)
	}
	if res.Lines != n+1 || res.Stored != n || res.Superseded != 0 || res.Removed != n-1 || res.Invalid != 1 {
		t.Fatalf("counts %+v", res.Counts)
	}
	if len(res.Errors) != 1 || res.Errors[0].Line != 400 {
		t.Fatalf("errors %+v", res.Errors)
	}
	raws := storedRaws(t, st)
	if len(raws) != 1 || !strings.Contains(raws[0], fmt.Sprintf(`v%d`, n-1)) {
		t.Fatalf("stored %q", raws)
	}
}

func TestRunInterrupted(t *testing.T) {
	k := relaytest.NewKey("import-cancel")
	ev := string(k.Note("x").Raw) + "\n"
	st := openStore(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	res, err := Run(ctx, st, strings.NewReader(strings.Repeat(ev, 5000)), Options{NoVerify: true})
	if err != nil {
		t.Fatal(err)
	}
	if !res.Interrupted || res.Lines >= 5000 || res.Stored != 1 || res.Duplicate != res.Lines-1 {
		t.Fatalf("interrupted %v after %d lines: %+v", res.Interrupted, res.Lines, res.Counts)
	}
}

// TestRunInputFails: when the input fails, the lines read whole before
// it are checked and saved (not a line the failure cut), and the error
// names the line after them.
func TestRunInputFails(t *testing.T) {
	k := relaytest.NewKey("import-input-fails")
	var whole string
	for i := range 3 {
		whole += string(k.Note(fmt.Sprint("n", i)).Raw) + "\n"
	}
	cut := string(k.Note("cut").Raw)
	st := openStore(t)
	boom := errors.New("boom")
	r := io.MultiReader(strings.NewReader(whole+cut[:40]), iotest.ErrReader(boom))
	res, err := Run(context.Background(), st, r, Options{NoVerify: true})
	if !errors.Is(err, boom) || !strings.HasPrefix(err.Error(), "read line 4: ") {
		t.Fatalf("error %v", err)
	}
	if res.Lines != 3 || res.Stored != 3 || res.Invalid != 0 {
		t.Fatalf("counts %+v", res.Counts)
	}
	if n := len(storedRaws(t, st)); n != 3 {
		t.Fatalf("stored %d", n)
	}
}

// TestRunLongLines: MaxLine is exact, with or without the newline, and
// lines longer than the read buffer (1 MiB) are read whole or skipped
// whole, the next line being read as usual.
func TestRunLongLines(t *testing.T) {
	k := relaytest.NewKey("import-long")
	small := string(k.Note("small").Raw)
	big := string(k.Event(1, strings.Repeat("y", 3<<19), nil, fixtureBase).Raw) // 1.5 MiB
	f := func(input string, maxLine int, stored, invalid int64) {
		t.Helper()
		st := openStore(t)
		res, err := Run(context.Background(), st, strings.NewReader(input), Options{MaxLine: maxLine, MaxErrors: 5})
		if err != nil {
			t.Fatal(err)
		}
		if res.Stored != stored || res.Invalid != invalid {
			t.Fatalf("max %d: stored %d invalid %d, want %d and %d (%+v)", maxLine, res.Stored, res.Invalid, stored, invalid, res.Errors)
		}
		if invalid > 0 && !strings.Contains(res.Errors[0].Err, "line longer than") {
			t.Fatalf("error %+v", res.Errors[0])
		}
	}
	f(small, len(small), 1, 0)
	f(small+"\n", len(small), 1, 0)
	f(small+"\r\n", len(small)+1, 1, 0)
	f(small, len(small)-1, 0, 1)
	f(small+"\n", len(small)-1, 0, 1)
	f(big+"\n"+small, 0, 2, 0)
	f(big+"\n"+small+"\n", 1<<20, 1, 1)
	f(small+"\n"+big, 1<<20, 1, 1)
}

// failingStore fails every Save after the first ok ones.
type failingStore struct {
	store.Store
	ok int
}

func (s *failingStore) Save(ctx context.Context, evs []*nostr.Event) ([]store.SaveResult, error) {
	if s.ok == 0 {
		return nil, errors.New("disk full")
	}
	s.ok--
	return s.Store.Save(ctx, evs)
}

// TestRunStoreFails: a failing store stops the import (no deadlock with
// the readers and workers still busy) and the error says why.
func TestRunStoreFails(t *testing.T) {
	k := relaytest.NewKey("import-fail")
	var b strings.Builder
	for i := range 3000 {
		b.Write(k.Event(1, fmt.Sprint(i), nil, fixtureBase+int64(i)).Raw)
		b.WriteByte('\n')
	}
	st := &failingStore{Store: storetest.NewModel(), ok: 2}
	res, err := Run(context.Background(), st, strings.NewReader(b.String()), Options{NoVerify: true, Batch: 100})
	if err == nil || !strings.Contains(err.Error(), "save: disk full") {
		t.Fatalf("error %v", err)
	}
	if res.Stored != 200 {
		t.Fatalf("stored %d, want the two batches before the failure", res.Stored)
	}
}

// TestRunVanishGiftWraps: a request to vanish in a dump removes the gift
// wraps addressed to its author that came before it in the dump, and
// refuses those after it (NIP-62), as it does when published.
func TestRunVanishGiftWraps(t *testing.T) {
	alice, sender := relaytest.NewKey("import-vanish-alice"), relaytest.NewKey("import-vanish-sender")
	toAlice := nostr.Tags{{"p", alice.PK.Hex()}}
	before := sender.Event(1059, "sealed", toAlice, fixtureBase+1)
	toBob := sender.Event(1059, "sealed", nostr.Tags{{"p", sender.PK.Hex()}}, fixtureBase+1)
	req := alice.Event(62, "", nostr.Tags{{"relay", nostr.AllRelays}}, fixtureBase+10)
	after := sender.Event(1059, "sealed again", toAlice, fixtureBase+2)
	later := sender.Event(1059, "new", toAlice, fixtureBase+11)
	var b strings.Builder
	for _, ev := range []*nostr.Event{before, toBob, req, after, later} {
		b.Write(ev.Raw)
		b.WriteByte('\n')
	}
	st := openStore(t)
	res, err := Run(context.Background(), st, strings.NewReader(b.String()), Options{MaxLine: 4096, MaxErrors: 10, Workers: 1, Batch: 1})
	if err != nil {
		t.Fatal(err)
	}
	if res.Stored != 4 || res.Removed != 1 || res.Deleted != 1 {
		t.Fatalf("stored %d removed %d deleted %d, want 4, 1, 1", res.Stored, res.Removed, res.Deleted)
	}
	for _, c := range []struct {
		ev   *nostr.Event
		want bool
	}{{before, false}, {toBob, true}, {req, true}, {after, false}, {later, true}} {
		if has, err := st.Has(context.Background(), c.ev.ID); err != nil || has != c.want {
			t.Fatalf("%.12s stored = %v (%v), want %v", c.ev.ID.Hex(), has, err, c.want)
		}
	}
}

// benchData returns n generated signed notes as JSONL, made once per
// process for each n.
var benchCache = map[int][]byte{}

func benchData(b *testing.B, n int) []byte {
	if d, ok := benchCache[n]; ok {
		return d
	}
	g := bench.NewGenerator(bench.GenConfig{Seed: 7, Start: fixtureBase})
	set, err := g.Generate(context.Background(), 0, n, 0, nil)
	if err != nil {
		b.Fatal(err)
	}
	var buf bytes.Buffer
	for _, ev := range set.Events {
		buf.Write(ev.Raw)
		buf.WriteByte('\n')
	}
	benchCache[n] = buf.Bytes()
	return buf.Bytes()
}

// BenchmarkImport measures Run from memory into a fresh pebble store
// (NoSync, as `petrel import` opens it) per iteration, with and without
// signature verification. The store's opening and closing are not timed.
func BenchmarkImport(b *testing.B) {
	const n = 20000
	data := benchData(b, n)
	for _, verify := range []bool{true, false} {
		b.Run(fmt.Sprintf("events=%d/verify=%v", n, verify), func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(data)))
			var events int64
			var elapsed time.Duration
			for range b.N {
				b.StopTimer()
				st, err := pebble.Open(pebble.Options{Path: b.TempDir(), NoSync: true, Logger: quietLog, PurgeInterval: -1, BodyCacheBytes: -1})
				if err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
				start := time.Now()
				res, err := Run(context.Background(), st, bytes.NewReader(data), Options{NoVerify: !verify})
				elapsed += time.Since(start)
				b.StopTimer()
				if err != nil || res.Stored != n {
					b.Fatalf("%v: %+v", err, res.Counts)
				}
				events += res.Events
				st.Close()
				b.StartTimer()
			}
			b.ReportMetric(float64(events)/elapsed.Seconds(), "events/s")
		})
	}
}
