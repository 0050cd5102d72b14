package interop

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	nostr "github.com/nbd-wtf/go-nostr"
	gn "github.com/nbd-wtf/go-nostr/nip77/negentropy"
	"github.com/nbd-wtf/go-nostr/nip77/negentropy/storage/vector"

	"github.com/petrel-relay/petrel/internal/negentropy"
)

var update = flag.Bool("update", false, "rewrite the transcripts in ../testdata")

type id = [negentropy.IDSize]byte

// clientSide and serverSide are the two roles, for either implementation.
type clientSide interface {
	Initiate() ([]byte, error)
	ReconcileClient([]byte) ([]byte, []id, []id, error)
}

type serverSide interface {
	Reconcile([]byte) ([]byte, error)
}

// theirs makes a go-nostr session over items.
func theirs(items []negentropy.Item, limit int) *gn.Negentropy {
	v := vector.New()
	for _, it := range items {
		v.Insert(nostr.Timestamp(it.Timestamp), hex.EncodeToString(it.ID[:]))
	}
	v.Seal()
	return gn.New(v, limit)
}

// theirServer adapts a go-nostr session to serverSide.
type theirServer struct{ n *gn.Negentropy }

func (s theirServer) Reconcile(msg []byte) ([]byte, error) {
	out, err := s.n.Reconcile(hex.EncodeToString(msg))
	if err != nil {
		return nil, err
	}
	return hex.DecodeString(out)
}

// theirClient adapts a go-nostr session to clientSide. go-nostr reports
// ids on two buffered channels while Reconcile runs, so they are drained
// concurrently.
type theirClient struct{ n *gn.Negentropy }

func (c theirClient) Initiate() ([]byte, error) { return hex.DecodeString(c.n.Start()) }

func (c theirClient) ReconcileClient(msg []byte) (next []byte, have, need []id, err error) {
	stop := make(chan struct{})
	var wg sync.WaitGroup
	collect := func(ch chan string, dst *[]id) {
		defer wg.Done()
		add := func(s string) {
			b, derr := hex.DecodeString(s)
			if derr != nil || len(b) != negentropy.IDSize {
				panic(fmt.Sprintf("go-nostr reported id %q", s))
			}
			*dst = append(*dst, id(b))
		}
		for {
			select {
			case s, ok := <-ch:
				if !ok {
					return
				}
				add(s)
			case <-stop:
				// Reconcile has returned: its sends are all buffered.
				for {
					select {
					case s, ok := <-ch:
						if !ok {
							return
						}
						add(s)
					default:
						return
					}
				}
			}
		}
	}
	wg.Add(2)
	go collect(c.n.Haves, &have)
	go collect(c.n.HaveNots, &need)
	out, err := c.n.Reconcile(hex.EncodeToString(msg))
	close(stop)
	wg.Wait()
	if err != nil {
		return nil, nil, nil, err
	}
	if out == "" {
		return nil, have, need, nil
	}
	next, err = hex.DecodeString(out)
	return next, have, need, err
}

func ours(t testing.TB, items []negentropy.Item, limit int) *negentropy.Negentropy {
	t.Helper()
	v, err := negentropy.NewVector(slices.Clone(items))
	if err != nil {
		t.Fatal(err)
	}
	n, err := negentropy.New(v, limit)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// session is a completed run: every message in order (client first) and
// what the client learnt.
type session struct {
	msgs       [][]byte
	have, need []id
}

func run(t testing.TB, c clientSide, s serverSide) session {
	t.Helper()
	var out session
	msg, err := c.Initiate()
	if err != nil {
		t.Fatal(err)
	}
	for round := 1; msg != nil; round++ {
		if round > 1000 {
			t.Fatal("no end after 1000 rounds")
		}
		out.msgs = append(out.msgs, msg)
		reply, err := s.Reconcile(msg)
		if err != nil {
			t.Fatalf("round %d: server: %v", round, err)
		}
		out.msgs = append(out.msgs, reply)
		var have, need []id
		msg, have, need, err = c.ReconcileClient(reply)
		if err != nil {
			t.Fatalf("round %d: client: %v", round, err)
		}
		out.have, out.need = append(out.have, have...), append(out.need, need...)
	}
	return out
}

// missing returns how many ids of the symmetric difference the session
// did not report, failing on ids it reported wrongly.
func missing(t testing.TB, client, server []negentropy.Item, s session) int {
	t.Helper()
	inC, inS := map[id]bool{}, map[id]bool{}
	for _, it := range client {
		inC[it.ID] = true
	}
	for _, it := range server {
		inS[it.ID] = true
	}
	have, need := map[id]bool{}, map[id]bool{}
	for _, x := range s.have {
		if !inC[x] || inS[x] {
			t.Fatalf("have %x is not client-only", x)
		}
		have[x] = true
	}
	for _, x := range s.need {
		if !inS[x] || inC[x] {
			t.Fatalf("need %x is not server-only", x)
		}
		need[x] = true
	}
	n := 0
	for x := range inC {
		if !inS[x] && !have[x] {
			n++
		}
	}
	for x := range inS {
		if !inC[x] && !need[x] {
			n++
		}
	}
	return n
}

// genItems must match internal/negentropy's fixtures_test.go: item i has
// id SHA-256(seed ":" i) and timestamp base + (the id's first 8 bytes,
// little-endian) mod span, or base when span is 0.
func genItems(seed string, count int, base, span uint64) []negentropy.Item {
	items := make([]negentropy.Item, count)
	for i := range items {
		x := sha256.Sum256([]byte(seed + ":" + strconv.Itoa(i)))
		ts := base
		if span != 0 {
			ts += binary.LittleEndian.Uint64(x[:8]) % span
		}
		items[i] = negentropy.Item{Timestamp: ts, ID: x}
	}
	return items
}

// spec is a generated pair of sets.
type spec struct {
	gens           []gen
	climit, slimit int
}

type gen struct {
	side       string // client, server or both
	seed       string
	count      int
	base, span uint64
}

func (s spec) sets() (client, server []negentropy.Item) {
	for _, g := range s.gens {
		items := genItems(g.seed, g.count, g.base, g.span)
		if g.side != "server" {
			client = append(client, items...)
		}
		if g.side != "client" {
			server = append(server, items...)
		}
	}
	return client, server
}

// randomSpec draws sets of up to a few thousand items a side, with ties.
func randomSpec(r *rand.Rand, i int) spec {
	size := []int{0, 1, 31, 32, 200, 1000, 4000}[r.IntN(7)]
	common := r.IntN(size + 1)
	onlyC := r.IntN(size - common + 1)
	onlyS := size - common - onlyC
	base := r.Uint64N(1 << 40)
	span := []uint64{0, 1, 5, 3600, 1 << 30}[r.IntN(5)]
	tag := fmt.Sprintf("random-%d", i)
	limits := []int{0, 4096, 5000, 60000}
	return spec{
		gens: []gen{
			{"both", tag + "-both", common, base, span},
			{"client", tag + "-client", onlyC, base, span},
			{"server", tag + "-server", onlyS, base, span},
		},
		climit: limits[r.IntN(len(limits))],
		slimit: limits[r.IntN(len(limits))],
	}
}

// TestInterop runs our client against go-nostr's server and go-nostr's
// client against our server on random sets, and checks each finds the
// symmetric difference.
func TestInterop(t *testing.T) {
	r := rand.New(rand.NewPCG(77, 1))
	cases := 60
	if testing.Short() {
		cases = 15
	}
	for i := range cases {
		sp := randomSpec(r, i)
		client, server := sp.sets()
		pairs := []struct {
			name string
			c    clientSide
			s    serverSide
		}{
			{"ours/theirs", ours(t, client, sp.climit), theirServer{theirs(server, sp.slimit)}},
			{"theirs/ours", theirClient{theirs(client, sp.climit)}, ours(t, server, sp.slimit)},
		}
		for _, p := range pairs {
			s := run(t, p.c, p.s)
			if n := missing(t, client, server, s); n != 0 {
				t.Errorf("case %d %s (%d/%d items, limits %d/%d): %d ids missed",
					i, p.name, len(client), len(server), sp.climit, sp.slimit, n)
			}
		}
	}
}

// sameExceptTail mirrors internal/negentropy's: equal, or differing only
// in the fingerprint of a closing Fingerprint range to infinity.
func sameExceptTail(ours, theirs []byte) bool {
	if bytes.Equal(ours, theirs) {
		return true
	}
	const fp = negentropy.FingerprintSize
	n := len(theirs)
	return len(ours) == n && n >= 4+fp &&
		bytes.Equal(ours[:n-fp], theirs[:n-fp]) &&
		bytes.Equal(theirs[n-fp-3:n-fp], []byte{0, 0, 1})
}

// TestSameBytes records go-nostr sessions on random sets and checks that
// our client and server, fed the same messages, answer with the same
// bytes (up to the closing fingerprint of a cut message, see the
// negentropy package doc).
func TestSameBytes(t *testing.T) {
	r := rand.New(rand.NewPCG(78, 2))
	cases := 60
	if testing.Short() {
		cases = 15
	}
	tails := 0
	for i := range cases {
		sp := randomSpec(r, i)
		client, server := sp.sets()
		s := run(t, theirClient{theirs(client, sp.climit)}, theirServer{theirs(server, sp.slimit)})
		c, sv := ours(t, client, sp.climit), ours(t, server, sp.slimit)
		first, err := c.Initiate()
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(first, s.msgs[0]) {
			t.Fatalf("case %d: initial message differs", i)
		}
		for j := 1; j < len(s.msgs); j++ {
			var got []byte
			if j%2 == 1 {
				got, err = sv.Reconcile(s.msgs[j-1])
			} else {
				got, _, _, err = c.ReconcileClient(s.msgs[j-1])
			}
			if err != nil {
				t.Fatalf("case %d message %d: %v", i, j, err)
			}
			if !sameExceptTail(got, s.msgs[j]) {
				t.Fatalf("case %d (limits %d/%d) message %d: %d bytes, go-nostr %d\n ours   %.160x\n theirs %.160x",
					i, sp.climit, sp.slimit, j, len(got), len(s.msgs[j]), got, s.msgs[j])
			}
			if !bytes.Equal(got, s.msgs[j]) {
				tails++
			}
		}
	}
	t.Logf("%d messages differed only in the closing fingerprint", tails)
}

// tailSpec is the case of internal/negentropy's tail_test.go: a session
// cut by frame size limits where the reference's closing fingerprint
// loses ids. See there for how it works.
func tailSpec() spec {
	var sp spec
	for b := range uint64(13) {
		sp.gens = append(sp.gens,
			gen{"both", fmt.Sprintf("tail-low-%d", b), 600, b * 100000, 99000},
			gen{"server", fmt.Sprintf("tail-extra-%d", b), 1, b*100000 + 99500, 0})
	}
	sp.gens = append(sp.gens, gen{"client", "tail-high", 1800, 10000000, 100000})
	sp.climit, sp.slimit = tailClientLimit, tailServerLimit
	return sp
}

// The limits at which tailSpec trips go-nostr (found by scanning limits
// for the first pair where the cuts fall as tail_test.go describes).
const tailClientLimit, tailServerLimit = 4401, 4369

// TestTailLoss shows go-nostr losing ids against itself on tailSpec, and
// what happens when either side is ours.
func TestTailLoss(t *testing.T) {
	sp := tailSpec()
	client, server := sp.sets()
	s := run(t, theirClient{theirs(client, sp.climit)}, theirServer{theirs(server, sp.slimit)})
	if n := missing(t, client, server, s); n == 0 {
		t.Errorf("go-nostr against itself found everything: the case no longer trips it")
	} else {
		t.Logf("go-nostr client, go-nostr server: %d ids missed in %d rounds", n, len(s.msgs)/2)
	}
	s = run(t, ours(t, client, sp.climit), theirServer{theirs(server, sp.slimit)})
	if n := missing(t, client, server, s); n != 0 {
		t.Errorf("our client, go-nostr server: %d ids missed", n)
	}
	// Their client sends the closing fingerprint that misleads the server,
	// so our server cannot help it.
	s = run(t, theirClient{theirs(client, sp.climit)}, ours(t, server, sp.slimit))
	t.Logf("go-nostr client, our server: %d ids missed", missing(t, client, server, s))
}

// TestWriteTranscripts records go-nostr sessions into ../testdata for
// internal/negentropy's TestTranscripts. It only writes with -update.
func TestWriteTranscripts(t *testing.T) {
	if !*update {
		t.Skip("run with -update to rewrite the transcripts")
	}
	cases := []struct {
		name, about string
		sp          spec
		lossy       bool
	}{
		{"gonostr-empty", "both sets empty", spec{}, false},
		{"gonostr-small", "a few items, some on one side only", spec{gens: []gen{
			{"both", "small-both", 15, 1700000000, 100},
			{"client", "small-client", 5, 1700000000, 100},
			{"server", "small-server", 10, 1700000000, 100},
		}}, false},
		{"gonostr-ties", "1000 shared items and 40 on each side only, all with one timestamp", spec{gens: []gen{
			{"both", "ties-both", 1000, 1700000000, 0},
			{"client", "ties-client", 40, 1700000000, 0},
			{"server", "ties-server", 40, 1700000000, 0},
		}}, false},
		{"gonostr-limit-4096", "frame size limit 4096 on both sides", spec{gens: []gen{
			{"both", "limit-both", 800, 1700000000, 30 * 86400},
			{"client", "limit-client", 150, 1700000000, 30 * 86400},
			{"server", "limit-server", 150, 1700000000, 30 * 86400},
		}, climit: 4096, slimit: 4096}, false},
		{"gonostr-limit-server", "an empty client; the server's id lists are cut at 4096 bytes", spec{gens: []gen{
			{"server", "idlist-server", 400, 1700000000, 86400},
		}, slimit: 4096}, false},
		{"gonostr-tail-loss", "go-nostr losing ids to its closing fingerprint (see tail_test.go)", tailSpec(), true},
	}
	for _, c := range cases {
		client, server := c.sp.sets()
		s := run(t, theirClient{theirs(client, c.sp.climit)}, theirServer{theirs(server, c.sp.slimit)})
		lost := missing(t, client, server, s)
		if (lost != 0) != c.lossy {
			t.Fatalf("%s: %d ids missed", c.name, lost)
		}
		var b strings.Builder
		fmt.Fprintf(&b, "# %s.\n", c.about)
		b.WriteString("# Recorded from go-nostr v0.38.2 nip77/negentropy (client and server) by\n")
		b.WriteString("# internal/negentropy/interop: go test -run TestWriteTranscripts -update\n")
		fmt.Fprintf(&b, "limits %d %d\n", c.sp.climit, c.sp.slimit)
		for _, g := range c.sp.gens {
			fmt.Fprintf(&b, "gen %s %s %d %d %d\n", g.side, g.seed, g.count, g.base, g.span)
		}
		for j, m := range s.msgs {
			side := "c"
			if j%2 == 1 {
				side = "s"
			}
			fmt.Fprintf(&b, "msg %s %x\n", side, m)
		}
		b.WriteString("end\n")
		if lost != 0 {
			fmt.Fprintf(&b, "lost %d\n", lost)
		}
		path := filepath.Join("..", "testdata", c.name+".txt")
		if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("%s: %d messages, %d bytes", path, len(s.msgs), b.Len())
	}
}
