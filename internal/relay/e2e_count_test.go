package relay_test

// NIP-45 COUNT with the HyperLogLog "hll" field.

import (
	"encoding/hex"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/petrel-relay/petrel/internal/nostr"
	"github.com/petrel-relay/petrel/internal/policy"
	"github.com/petrel-relay/petrel/internal/relay"
	"github.com/petrel-relay/petrel/internal/relaytest"
)

// refHLL computes NIP-45 registers bit by bit, as the NIP describes them,
// independently of the relay's code.
func refHLL(offset int, pubkeys []nostr.PubKey) []byte {
	reg := make([]byte, 256)
	for _, pk := range pubkeys {
		ri := pk[offset]
		z := 0
		for bit := 0; bit < 56; bit++ {
			b := pk[offset+1+bit/8]
			if b&(0x80>>(bit%8)) != 0 {
				break
			}
			z++
		}
		if v := byte(z + 1); v > reg[ri] {
			reg[ri] = v
		}
	}
	return reg
}

// estimateHLL is the usual HyperLogLog estimate with linear counting for
// small cardinalities (m = 256).
func estimateHLL(reg []byte) float64 {
	const m = 256.0
	sum, zeros := 0.0, 0
	for _, v := range reg {
		sum += math.Pow(2, -float64(v))
		if v == 0 {
			zeros++
		}
	}
	est := 0.7182725932495458 * m * m / sum
	if est <= 2.5*m && zeros > 0 {
		return m * math.Log(m/float64(zeros))
	}
	return est
}

func TestCountHLL(t *testing.T) {
	t.Parallel()
	r := relaytest.Start(t, relaytest.Options{})
	// A fixed created_at, so the target id (which picks the HLL offset)
	// and with it the estimate are the same on every run: the registers
	// are checked exactly against the reference below; the estimate's
	// error is a property of the sample (about 1 run in 300 would fall
	// outside 20% with a random id).
	target := relaytest.NewKey("author").Event(nostr.KindTextNote, "popular", nil, 1_700_000_000)
	const n = 400
	var reactions []*nostr.Event
	var pks []nostr.PubKey
	for i := range n {
		k := relaytest.NewKey(fmt.Sprintf("fan %d", i))
		reactions = append(reactions, k.Event(7, "+", nostr.Tags{{"e", target.ID.Hex()}}, 0))
		pks = append(pks, k.PK)
	}
	seed(t, r, append(reactions, target))
	c := relaytest.Dial(t, r.URL)
	m := count(t, c, "r", `{"kinds":[7],"#e":["`+target.ID.Hex()+`"]}`)
	if m.Count != n || m.HLL == nil {
		t.Fatalf("count %d hll %x", m.Count, m.HLL)
	}
	// The offset: character 32 of the target id, as hex, plus 8.
	var d int
	fmt.Sscanf(target.ID.Hex()[32:33], "%x", &d)
	want := refHLL(d+8, pks)
	if hex.EncodeToString(m.HLL) != hex.EncodeToString(want) {
		t.Fatalf("hll\n got %x\nwant %x", m.HLL, want)
	}
	if est := estimateHLL(m.HLL); math.Abs(est-n)/n > 0.2 {
		t.Fatalf("estimate %.0f for %d", est, n)
	}
	// Nothing matches: registers all zero.
	m = count(t, c, "z", `{"kinds":[7],"#e":["`+strings.Repeat("0", 64)+`"]}`)
	if m.Count != 0 || len(m.HLL) != 256 || strings.Trim(hex.EncodeToString(m.HLL), "0") != "" {
		t.Fatalf("empty: count %d hll %x", m.Count, m.HLL)
	}
	// Not eligible: no hll, exact count all the same.
	for _, tc := range []struct {
		f string
		n int64
	}{
		{`{"kinds":[7]}`, n},
		{`{"kinds":[7],"#e":["` + target.ID.Hex() + `"]},{"kinds":[1]}`, n + 1},
		{`{"#e":["` + target.ID.Hex() + `"],"#p":["` + target.PubKey.Hex() + `"]}`, 0},
	} {
		if m := count(t, c, "x", tc.f); m.HLL != nil || m.Count != tc.n {
			t.Fatalf("COUNT %s: count %d hll %x, want %d and no hll", tc.f, m.Count, m.HLL, tc.n)
		}
	}
}

func TestCountHLLScanLimit(t *testing.T) {
	t.Parallel()
	r := relaytest.Start(t, relaytest.Options{Relay: relay.Config{CountScanLimit: 50}})
	// A fixed created_at, so the target id (which picks the HLL offset)
	// and with it the estimate are the same on every run: the registers
	// are checked exactly against the reference below; the estimate's
	// error is a property of the sample (about 1 run in 300 would fall
	// outside 20% with a random id).
	target := relaytest.NewKey("author").Event(nostr.KindTextNote, "popular", nil, 1_700_000_000)
	var reactions []*nostr.Event
	for i := range 60 {
		reactions = append(reactions, relaytest.NewKey(fmt.Sprintf("fan %d", i)).Event(7, "+", nostr.Tags{{"e", target.ID.Hex()}}, 0))
	}
	seed(t, r, reactions[:50])
	c := relaytest.Dial(t, r.URL)
	f := `{"kinds":[7],"#e":["` + target.ID.Hex() + `"]}`
	if m := count(t, c, "a", f); m.Count != 50 || m.HLL == nil {
		t.Fatalf("at the limit: count %d hll %v", m.Count, m.HLL != nil)
	}
	seed(t, r, reactions[50:])
	if m := count(t, c, "b", f); m.Count != 60 || m.HLL != nil {
		t.Fatalf("past the limit: count %d hll %v", m.Count, m.HLL != nil)
	}
	if v := trips(r, "count_scan_limit"); v != 1 {
		t.Fatalf("count_scan_limit = %d", v)
	}
}

func TestCountRateLimit(t *testing.T) {
	t.Parallel()
	r := relaytest.Start(t, relaytest.Options{Policy: policy.Config{ReqRate: 0.001, ReqBurst: 2}})
	c := relaytest.Dial(t, r.URL)
	count(t, c, "a", `{"kinds":[1]}`)
	c.Req("b", `{"kinds":[1]}`)
	c.SendRaw(`["COUNT","c",{"kinds":[1]}]`)
	c.ExpectClosed("c", "rate-limited: ")
	c.SendRaw(`["REQ","d",{"kinds":[1]}]`)
	c.ExpectClosed("d", "rate-limited: ")
	st := r.Stats()
	if st.LimitTrips["req_rate_ip"] != 2 || st.Policy.ReqRateIP.Limited != 2 || st.RequestsRefused["rate-limited"] != 2 {
		t.Fatalf("trips %d, limited %d, refused %d", st.LimitTrips["req_rate_ip"], st.Policy.ReqRateIP.Limited, st.RequestsRefused["rate-limited"])
	}
}
