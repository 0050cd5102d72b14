package negentropy

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// A transcript fixture (testdata/*.txt) records one session between a
// client and a server of another implementation, message by message. The
// format is described in testdata/README.md.
type transcript struct {
	name           string
	climit, slimit int
	client, server []Item
	msgs           []transcriptMsg
	end            bool
	lost           int // ids of the symmetric difference the session missed
}

type transcriptMsg struct {
	fromClient bool
	data       []byte
}

// genItems makes count items from seed: item i has id
// SHA-256(seed ":" i) and timestamp base + (the id's first 8 bytes,
// little-endian) mod span, or base when span is 0.
func genItems(seed string, count int, base, span uint64) []Item {
	items := make([]Item, count)
	for i := range items {
		id := sha256.Sum256([]byte(seed + ":" + strconv.Itoa(i)))
		ts := base
		if span != 0 {
			ts += binary.LittleEndian.Uint64(id[:8]) % span
		}
		items[i] = Item{Timestamp: ts, ID: id}
	}
	return items
}

func readTranscript(path string) (*transcript, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	tr := &transcript{name: filepath.Base(path)}
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 16<<20)
	line := 0
	addTo := func(side string, items []Item) error {
		switch side {
		case "client":
			tr.client = append(tr.client, items...)
		case "server":
			tr.server = append(tr.server, items...)
		case "both":
			tr.client = append(tr.client, items...)
			tr.server = append(tr.server, items...)
		default:
			return fmt.Errorf("side %q", side)
		}
		return nil
	}
	for sc.Scan() {
		line++
		f := strings.Fields(sc.Text())
		if len(f) == 0 || strings.HasPrefix(f[0], "#") {
			continue
		}
		bad := func(err error) error { return fmt.Errorf("%s:%d: %w", path, line, err) }
		num := func(s string) uint64 {
			n, perr := strconv.ParseUint(s, 10, 64)
			if perr != nil && err == nil {
				err = perr
			}
			return n
		}
		switch {
		case f[0] == "limits" && len(f) == 3:
			tr.climit, tr.slimit = int(num(f[1])), int(num(f[2]))
		case f[0] == "gen" && len(f) == 6:
			items := genItems(f[2], int(num(f[3])), num(f[4]), num(f[5]))
			if e := addTo(f[1], items); e != nil {
				return nil, bad(e)
			}
		case f[0] == "item" && len(f) == 4:
			id, e := hex.DecodeString(f[3])
			if e != nil || len(id) != IDSize {
				return nil, bad(fmt.Errorf("id %q", f[3]))
			}
			if e := addTo(f[1], []Item{{Timestamp: num(f[2]), ID: [IDSize]byte(id)}}); e != nil {
				return nil, bad(e)
			}
		case f[0] == "msg" && len(f) == 3 && (f[1] == "c" || f[1] == "s"):
			b, e := hex.DecodeString(f[2])
			if e != nil {
				return nil, bad(e)
			}
			tr.msgs = append(tr.msgs, transcriptMsg{fromClient: f[1] == "c", data: b})
		case f[0] == "end" && len(f) == 1:
			tr.end = true
		case f[0] == "lost" && len(f) == 2:
			tr.lost = int(num(f[1]))
		default:
			return nil, bad(fmt.Errorf("bad line %q", sc.Text()))
		}
		if err != nil {
			return nil, bad(err)
		}
	}
	return tr, sc.Err()
}

// sameExceptTail reports whether ours equals theirs, or differs only in
// the fingerprint of a closing Fingerprint range to infinity (where this
// package deliberately differs from the reference: see the package doc).
func sameExceptTail(ours, theirs []byte) bool {
	if bytes.Equal(ours, theirs) {
		return true
	}
	n := len(theirs)
	tail := []byte{0, 0, modeFingerprint} // infinity, no prefix, Fingerprint
	return len(ours) == n && n >= 1+len(tail)+FingerprintSize &&
		bytes.Equal(ours[:n-FingerprintSize], theirs[:n-FingerprintSize]) &&
		bytes.Equal(theirs[n-FingerprintSize-len(tail):n-FingerprintSize], tail)
}

// TestTranscripts replays the sessions of other implementations recorded
// in testdata: fed the same messages, our client and server must produce
// the same bytes, with the reference's closing fingerprint exactly and
// with ours except for that fingerprint.
func TestTranscripts(t *testing.T) {
	paths, err := filepath.Glob("testdata/*.txt")
	if err != nil {
		t.Fatal(err)
	}
	if len(paths) == 0 {
		t.Fatal("no transcripts in testdata")
	}
	for _, path := range paths {
		tr, err := readTranscript(path)
		if err != nil {
			t.Fatal(err)
		}
		for _, refTail := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s/referenceTail=%v", tr.name, refTail), func(t *testing.T) {
				replay(t, tr, refTail)
			})
		}
	}
}

func replay(t *testing.T, tr *transcript, refTail bool) {
	if len(tr.msgs) == 0 || !tr.msgs[0].fromClient {
		t.Fatal("transcript does not start with a client message")
	}
	c, s := ours(t, tr.client, tr.server, tr.climit, tr.slimit)
	c.referenceTail, s.referenceTail = refTail, refTail
	tails := 0
	defer func() {
		if tails > 0 {
			t.Logf("%d messages differ from the transcript's in the closing fingerprint only", tails)
		}
	}()
	same := func(what string, i int, got, want []byte) {
		t.Helper()
		ok := bytes.Equal(got, want)
		if !ok {
			tails++
		}
		if !refTail {
			ok = sameExceptTail(got, want)
		}
		if !ok {
			t.Fatalf("message %d (%s): %d bytes differ from the transcript's %d\n got  %.200x\n want %.200x",
				i, what, len(got), len(want), got, want)
		}
	}
	first, err := c.Initiate()
	if err != nil {
		t.Fatal(err)
	}
	same("initial", 0, first, tr.msgs[0].data)
	var have, need [][IDSize]byte
	for i := 1; i < len(tr.msgs); i++ {
		m, prev := tr.msgs[i], tr.msgs[i-1]
		if m.fromClient == prev.fromClient {
			t.Fatalf("message %d: two in a row from the same side", i)
		}
		if !m.fromClient {
			reply, err := s.Reconcile(prev.data)
			if err != nil {
				t.Fatalf("message %d: server: %v", i, err)
			}
			same("server", i, reply, m.data)
			continue
		}
		next, h, n, err := c.ReconcileClient(prev.data)
		if err != nil {
			t.Fatalf("message %d: client: %v", i, err)
		}
		have, need = append(have, h...), append(need, n...)
		same("client", i, next, m.data)
	}
	last := tr.msgs[len(tr.msgs)-1]
	if tr.end {
		if last.fromClient {
			t.Fatal("transcript ends after a client message but says the client was done")
		}
		next, h, n, err := c.ReconcileClient(last.data)
		if err != nil || next != nil {
			t.Fatalf("client not done at the end: next %d bytes, err %v", len(next), err)
		}
		have, need = append(have, h...), append(need, n...)
		if tr.lost == 0 {
			checkDiff(t, tr.client, tr.server, have, need, tr.climit != 0 || tr.slimit != 0)
		} else if got := countMissing(tr.client, tr.server, have, need); got != tr.lost {
			t.Errorf("fed the transcript's messages, the client missed %d ids; the transcript says %d", got, tr.lost)
		}
	}
}

// countMissing returns how many ids of the symmetric difference of client
// and server are in neither have nor need.
func countMissing(client, server []Item, have, need [][IDSize]byte) int {
	in := map[[IDSize]byte]int{}
	for _, it := range client {
		in[it.ID] |= 1
	}
	for _, it := range server {
		in[it.ID] |= 2
	}
	found := map[[IDSize]byte]bool{}
	for _, x := range append(slices.Clone(have), need...) {
		found[x] = true
	}
	n := 0
	for x, sides := range in {
		if sides != 3 && !found[x] {
			n++
		}
	}
	return n
}
