package main

// The reliability battery (scripts/reliability.sh runs it, and
// docs/RELIABILITY.md records a full run): hostile and broken clients
// against a petrel serve process, each probe printing its counts on lines
// starting "reliability:". They run only when RELIABILITY is
// "short" (CI) or "full" (the recorded run), since they take minutes.

import (
	"bufio"
	"bytes"
	"compress/flate"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/petrel-relay/petrel/internal/client"
	"github.com/petrel-relay/petrel/internal/nostr"
	"github.com/petrel-relay/petrel/internal/relaytest"
	"github.com/petrel-relay/petrel/internal/server"
)

// reliabilityScale returns short or full, or skips the test.
func reliabilityScale(t *testing.T) (full bool) {
	t.Helper()
	switch os.Getenv("RELIABILITY") {
	case "short":
		return false
	case "full":
		return true
	}
	t.Skip("the reliability battery runs with RELIABILITY=short or full (scripts/reliability.sh)")
	return false
}

func pick[T any](full bool, short, long T) T {
	if full {
		return long
	}
	return short
}

// report prints one of the battery's count lines.
func report(t *testing.T, format string, args ...any) {
	t.Helper()
	line := "reliability: " + fmt.Sprintf(format, args...)
	t.Log(line)
	fmt.Fprintln(os.Stderr, line)
}

// TestReliabilityBadInputs sends malformed messages and checks the reply
// each must get: an EVENT whose id can be read gets OK false "invalid:",
// anything else a NOTICE (or CLOSED for a subscription), and the
// connection keeps working after each.
func TestReliabilityBadInputs(t *testing.T) {
	reliabilityScale(t)
	p := startServeProc(t, petrelBin(t), nil, "--data", t.TempDir()+"/data", "--listen", "127.0.0.1:0")
	key := relaytest.NewKey("bad-inputs")
	good := key.Note("template")
	id := good.ID.Hex()
	pk := good.PubKey.Hex()
	sig := good.Sig.Hex()
	ev := func(fields string) string {
		return `["EVENT",{"id":"` + id + `","pubkey":"` + pk + `","sig":"` + sig + `",` + fields + `}]`
	}
	base := `"created_at":` + fmt.Sprint(good.CreatedAt) + `,"kind":1,"tags":[],"content":"template"`
	with := func(field, value string) string {
		parts := map[string]string{"created_at": fmt.Sprint(good.CreatedAt), "kind": "1", "tags": "[]", "content": `"template"`}
		parts[field] = value
		return ev(`"created_at":` + parts["created_at"] + `,"kind":` + parts["kind"] + `,"tags":` + parts["tags"] + `,"content":` + parts["content"])
	}
	badSig := *good
	badSig.Sig[7] ^= 1
	badSig.Raw = nostr.Serialize(&badSig)
	deep := strings.Repeat("[", 10000) + strings.Repeat("]", 10000)
	var many strings.Builder
	many.WriteString("[")
	for i := 0; i < 2001; i++ {
		if i > 0 {
			many.WriteString(",")
		}
		many.WriteString(`["t","x"]`)
	}
	many.WriteString("]")
	okInvalid := func(msg string) (string, string, string) { return msg, "OK", "invalid: " }
	cases := [][3]string{
		{`not json`, "NOTICE", ""},
		{`[]`, "NOTICE", ""},
		{`{"a":1}`, "NOTICE", ""},
		{`["FOO"]`, "NOTICE", ""},
		{`["EVENT"]`, "NOTICE", "invalid: EVENT: missing event"},
		{`["EVENT",1]`, "NOTICE", "invalid: "},
		{`["EVENT",{}]`, "NOTICE", "invalid: "},
		{`["REQ"]`, "NOTICE", ""},
		{`["REQ","s",{"kinds":"x"}]`, "CLOSED", "invalid: "},
		{`["REQ","` + strings.Repeat("s", 65) + `",{}]`, "NOTICE", "invalid: REQ: subscription id too long"},
		{`["COUNT","c",{"ids":["zz"]}]`, "CLOSED", "invalid: "},
		{`["CLOSE"]`, "NOTICE", ""},
		{`["AUTH",{}]`, "NOTICE", ""},
		{`["NEG-OPEN","n",{},"zz"]`, "NEG-ERR", ""},
		{`["NEG-MSG","unknown","61"]`, "NEG-ERR", ""},
	}
	for _, c := range [][3]string{
		mk(okInvalid(with("kind", `"1"`))),
		mk(okInvalid(with("kind", `1.5`))),
		mk(okInvalid(with("kind", `-1`))),
		mk(okInvalid(with("kind", `1180591620717411303424`))),
		mk(okInvalid(with("created_at", `"1"`))),
		mk(okInvalid(with("created_at", `1e20`))),
		mk(okInvalid(with("created_at", `-5`))),
		mk(okInvalid(with("tags", `"x"`))),
		mk(okInvalid(with("tags", `[["p",1]]`))),
		mk(okInvalid(with("tags", `[["p",null]]`))),
		mk(okInvalid(with("tags", `[{}]`))),
		mk(okInvalid(with("content", `5`))),
		mk(okInvalid(with("content", `"\ud800"`))),
		mk(okInvalid(with("tags", deep))),
		mk(okInvalid(with("tags", many.String()))),
		mk(okInvalid(`["EVENT",{"id":"` + id + `","pubkey":"` + strings.ToUpper(pk) + `","sig":"` + sig + `",` + base + `}]`)),
		mk(okInvalid(`["EVENT",` + string(badSig.Raw) + `]`)),
		mk(okInvalid(with("content", `"changed"`))), // the id no longer matches
	} {
		cases = append(cases, c)
	}
	c := relaytest.Dial(t, p.URL)
	defer c.Close()
	answered := 0
	for _, tc := range cases {
		c.SendRaw(tc[0])
		m, err := c.ReadWithin(10 * time.Second)
		if err != nil {
			t.Fatalf("%.80s: no answer: %v", tc[0], err)
		}
		got := m.Type
		msg := m.Message
		if got != tc[1] || !strings.HasPrefix(msg, tc[2]) || strings.Contains(msg, "EVENT: EVENT:") || (got == "OK" && (m.OK || m.EventID != good.ID)) {
			t.Errorf("%.80s: answered %s %q (ok %v), want %s %q...", tc[0], got, msg, m.OK, tc[1], tc[2])
			continue
		}
		answered++
		t.Logf("%.60s -> %s %q", tc[0], got, msg)
	}
	// Still working.
	c.MustPublish(key.Note("after the bad inputs"))
	report(t, "bad inputs: %d tried, %d answered as required, connection still usable", len(cases), answered)
}

func mk(a, b, c string) [3]string { return [3]string{a, b, c} }

// TestReliabilityKill9 kills petrel serve with SIGKILL while publishers
// keep events in flight, restarts it, and checks that every event that
// was answered OK true is stored: exact accounting of acknowledged ids.
func TestReliabilityKill9(t *testing.T) {
	full := reliabilityScale(t)
	cycles := pick(full, 3, 120)
	bin := petrelBin(t)
	data := t.TempDir() + "/data"
	rng := rand.New(rand.NewPCG(1, 2))
	acked := map[nostr.ID]bool{}
	var sent, refusedOrLost int
	for cycle := 0; cycle < cycles; cycle++ {
		p := startServeProc(t, bin, nil, "--data", data, "--listen", "127.0.0.1:0")
		if cycle > 0 {
			checkStored(t, p.URL, acked)
		}
		var mu sync.Mutex
		var wg sync.WaitGroup
		stop := make(chan struct{})
		for pub := 0; pub < 4; pub++ {
			wg.Add(1)
			go func(pub int) {
				defer wg.Done()
				key := relaytest.NewKey(fmt.Sprintf("kill9-%d", pub))
				conn, err := client.Dial(context.Background(), p.URL, client.Options{})
				if err != nil {
					return
				}
				defer conn.Close()
				oks := make(chan *nostr.RelayMessage, 64)
				inflight := 0
				for n := 0; ; n++ {
					select {
					case <-stop:
						return
					default:
					}
					for inflight < 32 {
						ev := key.Note(fmt.Sprintf("cycle %d pub %d n %d %d", cycle, pub, n, inflight))
						if conn.SendEvent(ev, oks) != nil {
							return
						}
						mu.Lock()
						sent++
						mu.Unlock()
						inflight++
					}
					select {
					case m := <-oks:
						inflight--
						mu.Lock()
						if m.OK {
							acked[m.EventID] = true
						} else {
							refusedOrLost++
						}
						mu.Unlock()
					case <-conn.Done():
						return
					case <-stop:
						return
					}
				}
			}(pub)
		}
		time.Sleep(time.Duration(200+rng.IntN(800)) * time.Millisecond)
		p.cmd.Process.Signal(syscall.SIGKILL)
		<-p.done
		close(stop)
		wg.Wait()
	}
	p := startServeProc(t, bin, nil, "--data", data, "--listen", "127.0.0.1:0")
	lost := checkStored(t, p.URL, acked)
	report(t, "kill -9: %d cycles, %d events sent, %d acknowledged, %d acknowledged lost", cycles, sent, len(acked), lost)
}

// checkStored fetches every stored event by id and reports (and fails on)
// acknowledged ones missing.
func checkStored(t *testing.T, url string, acked map[nostr.ID]bool) (lost int) {
	t.Helper()
	c := relaytest.Dial(t, url)
	defer c.Close()
	ids := make([]string, 0, len(acked))
	for id := range acked {
		ids = append(ids, `"`+id.Hex()+`"`)
	}
	found := map[nostr.ID]bool{}
	for i := 0; i < len(ids); i += 400 {
		j := min(i+400, len(ids))
		sub := fmt.Sprintf("chk%d", i)
		for _, ev := range c.Req(sub, `{"ids":[`+strings.Join(ids[i:j], ",")+`]}`) {
			found[ev.ID] = true
		}
		c.SendRaw(`["CLOSE","` + sub + `"]`)
	}
	for id := range acked {
		if !found[id] {
			lost++
			t.Errorf("acknowledged event %s lost", id.Hex())
		}
	}
	return lost
}

// TestReliabilitySlowSubscribers: subscribers that never read, one
// publisher; every publish is answered, the slow subscriptions are closed
// once their out-queues are full (memory bounded), and the memory their
// queues held is returned once they disconnect, with no other traffic.
func TestReliabilitySlowSubscribers(t *testing.T) {
	full := reliabilityScale(t)
	subs, events := pick(full, 100, 1000), pick(full, 1000, 20000)
	// Debug logging: a failure shows the releases the relay made.
	p := startServeProc(t, petrelBin(t), []string{"PETREL_SERVER_MAX_CONNECTIONS_PER_IP=-1", "PETREL_RELAY_DRAIN_TIMEOUT=10m", "PETREL_LOG_LEVEL=debug"},
		"--data", t.TempDir()+"/data", "--listen", "127.0.0.1:0")
	before := p.Stats(t).Process
	conns := make([]*relaytest.Client, subs)
	for i := range conns {
		c, err := relaytest.DialWith(t, p.URL, relaytest.DialOptions{NoRead: true, ReadBuffer: 4096})
		if err != nil {
			t.Fatal(err)
		}
		c.SendRaw(`["REQ","live",{"kinds":[1]}]`)
		conns[i] = c
	}
	pub, err := client.Dial(context.Background(), p.URL, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer pub.Close()
	key := relaytest.NewKey("slow-subs")
	oks := make(chan *nostr.RelayMessage, 128)
	body := strings.Repeat("s", 8000)
	var ok, refused int
	var peak server.ProcessStats
	var peakQueued int64
	sample := func() {
		s := p.Stats(t)
		peak.RSSBytes = max(peak.RSSBytes, s.Process.RSSBytes)
		peak.HeapResidentBytes = max(peak.HeapResidentBytes, s.Process.HeapResidentBytes)
		peakQueued = max(peakQueued, s.OutQueueBytes)
	}
	sent := 0
	for sent < events || ok+refused < events {
		for sent < events && sent-(ok+refused) < 64 {
			if err := pub.SendEvent(key.Note(fmt.Sprintf("%s %d", body, sent)), oks); err != nil {
				t.Fatal(err)
			}
			sent++
		}
		select {
		case m := <-oks:
			if m.OK {
				ok++
			} else {
				refused++
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("no OK for 30s: %d sent, %d answered", sent, ok+refused)
		}
		if (ok+refused)%200 == 0 {
			sample()
		}
	}
	time.Sleep(2 * time.Second) // quiet with the queues full
	sample()
	st := p.Stats(t)
	for _, c := range conns {
		c.Close()
	}
	closedAt := time.Now()
	bound := before.HeapResidentBytes + (peak.HeapResidentBytes-before.HeapResidentBytes)/4 + 16<<20
	var after server.ProcessStats
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(500 * time.Millisecond) {
		s := p.Stats(t)
		after = s.Process
		if s.ConnectionsActive == 1 && after.HeapResidentBytes <= bound {
			break
		}
		if time.Now().After(deadline) {
			var released []string
			for _, l := range strings.Split(p.Log(), "\n") {
				if strings.Contains(l, "free heap") {
					released = append(released, l)
				}
			}
			t.Errorf("heap %d MiB 60s after the subscribers closed (bound %d MiB; objects %d MiB, live at the last of %d collections %d MiB, %d connections); the relay's releases:\n%s",
				after.HeapResidentBytes>>20, bound>>20, after.HeapObjectsBytes>>20, after.GCCycles, after.HeapLiveBytes>>20, s.ConnectionsActive, strings.Join(released, "\n"))
			break
		}
	}
	report(t, "never-reading subscribers: %d subscribers, %d events of 8 KB, %d OK true, %d refused, %d subscriptions closed as slow, peak %d MiB queued; RSS %d MiB before, %d MiB peak, %d MiB %v after they closed; heap %d / %d / %d MiB",
		subs, events, ok, refused, st.BuffersDropped, peakQueued>>20, before.RSSBytes>>20, peak.RSSBytes>>20, after.RSSBytes>>20,
		time.Since(closedAt).Round(time.Second), before.HeapResidentBytes>>20, peak.HeapResidentBytes>>20, after.HeapResidentBytes>>20)
	if ok != events || st.BuffersDropped < int64(subs) {
		t.Fatalf("%d of %d events accepted, %d slow subscriptions closed (want %d)", ok, events, st.BuffersDropped, subs)
	}
}

// TestReliabilitySlowloris opens connections that send their HTTP request
// head a byte at a time and never finish it: the relay closes each after
// server.header_timeout, and serves a normal client meanwhile.
func TestReliabilitySlowloris(t *testing.T) {
	full := reliabilityScale(t)
	n := pick(full, 100, 1000)
	p := startServeProc(t, petrelBin(t), []string{"PETREL_SERVER_HEADER_TIMEOUT=2s", "PETREL_SERVER_MAX_CONNECTIONS_PER_IP=-1"},
		"--data", t.TempDir()+"/data", "--listen", "127.0.0.1:0")
	addr := strings.TrimPrefix(p.URL, "ws://")
	var closed atomic.Int32
	var wg sync.WaitGroup
	start := time.Now()
	for i := 0; i < n; i++ {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer c.Close()
			head := "GET / HTTP/1.1\r\nHost: " + addr + "\r\nX-Slow: "
			for j := 0; ; j++ {
				c.SetWriteDeadline(time.Now().Add(time.Second))
				if _, err := c.Write([]byte{head[j%len(head)]}); err != nil {
					break
				}
				c.SetReadDeadline(time.Now().Add(500 * time.Millisecond))
				var b [1]byte
				if _, err := c.Read(b[:]); err == io.EOF || (err != nil && !isTimeout(err)) {
					break
				}
				if time.Since(start) > 60*time.Second {
					return
				}
			}
			closed.Add(1)
		}()
	}
	// A normal client is served meanwhile.
	c := relaytest.Dial(t, p.URL)
	c.MustPublish(relaytest.NewKey("slowloris").Note("served during the slowloris"))
	c.Close()
	wg.Wait()
	report(t, "slowloris: %d connections sending a byte per 500ms, %d closed by the relay within %v, a normal client served meanwhile", n, closed.Load(), time.Since(start).Round(time.Second))
	if int(closed.Load()) != n {
		t.Fatalf("%d of %d slow connections closed by the relay", closed.Load(), n)
	}
}

func isTimeout(err error) bool {
	ne, ok := err.(net.Error)
	return ok && ne.Timeout()
}

// TestReliabilityCompressionBomb offers permessage-deflate and sends a
// compressed frame that inflates to far more than max_message_bytes: the
// relay either refuses the extension and closes on the RSV1 bit (1002),
// or inflates no more than its limit and closes with 1009. Its memory
// does not follow the bomb, and it keeps serving.
func TestReliabilityCompressionBomb(t *testing.T) {
	full := reliabilityScale(t)
	bombs := pick(full, 5, 50)
	p := startServeProc(t, petrelBin(t), nil, "--data", t.TempDir()+"/data", "--listen", "127.0.0.1:0")
	addr := strings.TrimPrefix(p.URL, "ws://")
	var bomb bytes.Buffer
	fw, _ := flate.NewWriter(&bomb, flate.BestCompression)
	zeros := make([]byte, 1<<20)
	for i := 0; i < 256; i++ { // 256 MiB inflated
		fw.Write(zeros)
	}
	fw.Flush()
	payload := bytes.TrimSuffix(bomb.Bytes(), []byte{0, 0, 0xff, 0xff})
	before := p.Stats(t).Process.RSSBytes
	codes := map[int]int{}
	negotiated := 0
	for i := 0; i < bombs; i++ {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		req := "GET / HTTP/1.1\r\nHost: " + addr + "\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n" +
			"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Extensions: permessage-deflate\r\n\r\n"
		io.WriteString(c, req)
		c.SetDeadline(time.Now().Add(30 * time.Second))
		r := bufio.NewReader(c)
		res, err := http.ReadResponse(r, nil)
		if err != nil || res.StatusCode != http.StatusSwitchingProtocols {
			t.Fatalf("upgrade: %v %v", err, res)
		}
		if strings.Contains(res.Header.Get("Sec-WebSocket-Extensions"), "permessage-deflate") {
			negotiated++
		}
		// FIN, RSV1, text; masked.
		f := []byte{0xC1, 0x80 | 127}
		f = binary.BigEndian.AppendUint64(f, uint64(len(payload)))
		mask := [4]byte{1, 2, 3, 4}
		f = append(f, mask[:]...)
		for j, b := range payload {
			f = append(f, b^mask[j%4])
		}
		c.Write(f)
		code := -1
		for {
			var h [2]byte
			if _, err := io.ReadFull(r, h[:]); err != nil {
				break
			}
			n := int(h[1] & 0x7f)
			switch n {
			case 126:
				var b [2]byte
				io.ReadFull(r, b[:])
				n = int(binary.BigEndian.Uint16(b[:]))
			case 127:
				var b [8]byte
				io.ReadFull(r, b[:])
				n = int(binary.BigEndian.Uint64(b[:]))
			}
			body := make([]byte, n)
			if _, err := io.ReadFull(r, body); err != nil {
				break
			}
			if h[0]&0x0f == 0x8 && len(body) >= 2 {
				code = int(binary.BigEndian.Uint16(body))
				break
			}
		}
		codes[code]++
		c.Close()
	}
	c := relaytest.Dial(t, p.URL)
	c.MustPublish(relaytest.NewKey("bomb").Note("served after the bombs"))
	c.Close()
	after := p.Stats(t).Process.RSSBytes
	report(t, "compression bomb: %d frames of %d KiB inflating to 256 MiB each, deflate negotiated %d times, close codes %v, RSS %d MiB before and %d MiB after, relay still serving",
		bombs, len(payload)>>10, negotiated, codes, before>>20, after>>20)
	for code := range codes {
		if code != 1002 && code != 1009 {
			t.Fatalf("close codes %v, want 1002 (no extension) or 1009 (too big)", codes)
		}
	}
	if after > before+64<<20 {
		t.Fatalf("RSS grew from %d to %d MiB", before>>20, after>>20)
	}
}

// TestReliabilityBadSignatureFlood: one connection sends events with
// bad signatures as fast as it can; it is answered OK false "invalid:"
// and closed after relay.max_bad_signatures, counted in /stats, while
// another publisher's valid events are all accepted.
func TestReliabilityBadSignatureFlood(t *testing.T) {
	full := reliabilityScale(t)
	flood, valid := pick(full, 2000, 20000), pick(full, 300, 3000)
	p := startServeProc(t, petrelBin(t), nil, "--data", t.TempDir()+"/data", "--listen", "127.0.0.1:0")
	mallory := relaytest.NewKey("mallory")
	var mu sync.Mutex
	answers := map[string]int{} // OK value and message prefix -> count
	var accepted atomic.Int32
	var floodSent atomic.Int32
	floodDone := make(chan struct{})
	go func() {
		defer close(floodDone)
		conn, err := client.Dial(context.Background(), p.URL, client.Options{})
		if err != nil {
			return
		}
		defer conn.Close()
		oks := make(chan *nostr.RelayMessage, flood)
		for i := 0; i < flood; i++ {
			ev := mallory.Note(fmt.Sprintf("forged %d", i))
			ev.Sig[9] ^= 1
			ev.Raw = nostr.Serialize(ev)
			if conn.SendEvent(ev, oks) != nil {
				break
			}
			floodSent.Add(1)
		}
		count := func(m *nostr.RelayMessage) {
			prefix, _, _ := strings.Cut(m.Message, ":")
			mu.Lock()
			answers[fmt.Sprintf("OK %v %s", m.OK, prefix)]++
			mu.Unlock()
			if m.OK {
				accepted.Add(1)
			}
		}
		for {
			select {
			case m := <-oks:
				count(m)
			case <-conn.Done():
				for {
					select {
					case m := <-oks:
						count(m)
					default:
						return
					}
				}
			case <-time.After(30 * time.Second):
				return
			}
		}
	}()
	alice := relaytest.NewKey("alice")
	c := relaytest.Dial(t, p.URL)
	validOK := 0
	for i := 0; i < valid; i++ {
		if m := c.Publish(alice.Note(fmt.Sprintf("valid %d", i))); m.OK {
			validOK++
		} else {
			t.Errorf("valid event refused during the flood: %s", m.Message)
		}
	}
	<-floodDone
	st := p.Stats(t)
	report(t, "bad-signature flood: %d forged events written before the relay closed the connection, answers %v, bad_signatures limit tripped %d; %d of %d valid events from another client accepted",
		floodSent.Load(), answers, st.LimitTrips["bad_signatures"], validOK, valid)
	if validOK != valid || st.LimitTrips["bad_signatures"] < 1 || accepted.Load() != 0 || int(floodSent.Load()) == flood {
		t.Fatal("the flood was not contained")
	}
}
