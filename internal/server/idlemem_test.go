package server_test

import (
	"bytes"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/petrel-relay/petrel/internal/nostr"
	"github.com/petrel-relay/petrel/internal/relay"
	"github.com/petrel-relay/petrel/internal/relaytest"
)

// The memory an idle subscribed connection costs the relay, measured in
// process and attributed to the parts that hold it (docs/BENCHMARKS.md,
// "Where an idle connection's memory goes"). The clients are bare
// sockets driven by system calls from the test goroutine: they allocate
// nothing on the Go heap per connection, so the heap's growth is the
// relay's alone.

// sockClient is one client connection: a blocking socket, no buffers.
type sockClient struct{ fd int }

func dialSock(t testing.TB, ap netip.AddrPort) sockClient {
	t.Helper()
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatalf("socket: %v", err)
	}
	tv := syscall.NsecToTimeval(int64(20 * time.Second))
	_ = syscall.SetsockoptTimeval(fd, syscall.SOL_SOCKET, syscall.SO_RCVTIMEO, &tv)
	_ = syscall.SetsockoptTimeval(fd, syscall.SOL_SOCKET, syscall.SO_SNDTIMEO, &tv)
	if err := connectSock(fd, &syscall.SockaddrInet4{Port: int(ap.Port()), Addr: ap.Addr().As4()}); err != nil {
		syscall.Close(fd)
		t.Fatalf("connect: %v", err)
	}
	c := sockClient{fd}
	c.write(t, []byte("GET / HTTP/1.1\r\nHost: relay\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"+
		"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n"))
	// The relay sends nothing after its 101 until asked, so reading up
	// to the blank line reads exactly the response.
	var buf [512]byte
	n := 0
	for !bytes.Contains(buf[:n], []byte("\r\n\r\n")) {
		if n == len(buf) {
			t.Fatalf("upgrade response over %d bytes", len(buf))
		}
		m, err := syscall.Read(fd, buf[n:])
		if err == syscall.EINTR {
			continue
		}
		if err != nil || m == 0 {
			t.Fatalf("read upgrade response: %d, %v", m, err)
		}
		n += m
	}
	if !bytes.HasPrefix(buf[:n], []byte("HTTP/1.1 101")) {
		t.Fatalf("upgrade: %q", buf[:n])
	}
	return c
}

// connectSock connects a blocking socket. Go's runtime signals its
// threads (SIGURG preemption, the profiler), and a blocking connect(2)
// that a signal interrupts returns EINTR while the handshake goes on in
// the kernel; a socket with SO_RCVTIMEO/SO_SNDTIMEO set is not restarted
// either (signal(7)), so reads and writes retry EINTR too. After EINTR
// the connect is finished by waiting for the socket to become writable
// and reading its SO_ERROR, as connect(2) says for a non-blocking one.
func connectSock(fd int, sa syscall.Sockaddr) error {
	err := syscall.Connect(fd, sa)
	if err != syscall.EINTR {
		return err
	}
	for {
		pfd := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLOUT}}
		_, err := unix.Poll(pfd, 20000)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return err
		}
		break
	}
	soerr, err := syscall.GetsockoptInt(fd, syscall.SOL_SOCKET, syscall.SO_ERROR)
	if err != nil {
		return err
	}
	if soerr != 0 {
		return syscall.Errno(soerr)
	}
	return nil
}

func (c sockClient) write(t testing.TB, b []byte) {
	t.Helper()
	for len(b) > 0 {
		n, err := syscall.Write(c.fd, b)
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			t.Fatalf("write: %v", err)
		}
		b = b[n:]
	}
}

func (c sockClient) readFull(b []byte) error {
	for len(b) > 0 {
		n, err := syscall.Read(c.fd, b)
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			return err
		}
		if n == 0 {
			return errors.New("connection closed")
		}
		b = b[n:]
	}
	return nil
}

// readFrame reads one frame of the relay's into buf (grown as needed).
func (c sockClient) readFrame(t testing.TB, buf *[]byte) (byte, []byte) {
	t.Helper()
	var h [10]byte
	if err := c.readFull(h[:2]); err != nil {
		t.Fatalf("read frame: %v", err)
	}
	n := int(h[1] & 0x7f)
	switch n {
	case 126:
		if err := c.readFull(h[2:4]); err != nil {
			t.Fatalf("read frame: %v", err)
		}
		n = int(h[2])<<8 | int(h[3])
	case 127:
		t.Fatal("frame over 64 KiB")
	}
	if cap(*buf) < n {
		*buf = make([]byte, n)
	}
	p := (*buf)[:n]
	if err := c.readFull(p); err != nil {
		t.Fatalf("read frame: %v", err)
	}
	return h[0] & 0x0f, p
}

// expect reads frames until one of opcode op whose payload starts with
// prefix, failing on anything else but the relay's pings (answered).
func (c sockClient) expect(t testing.TB, buf *[]byte, op byte, prefix string) {
	t.Helper()
	for {
		got, p := c.readFrame(t, buf)
		if got == op && strings.HasPrefix(string(p), prefix) {
			return
		}
		if got == 0x9 && op != 0x9 {
			c.write(t, rawFrame(0x8a, true, p))
			continue
		}
		t.Fatalf("want opcode %#x %q...; got %#x %q", op, prefix, got, p)
	}
}

func (c sockClient) close() { syscall.Close(c.fd) }

// heapSnap is the relay process's heap at one moment: the allocation
// profile by call stack (every allocation sampled) and MemStats.
type heapSnap struct {
	ms    runtime.MemStats
	sites map[[32]uintptr]runtime.MemProfileRecord
}

func snapHeap() heapSnap {
	// The profile is up to two collections old, and sync.Pool's
	// contents (nbio's buffers, the out-queue segments) outlive two:
	// five make it current with the pools emptied.
	for range 5 {
		runtime.GC()
	}
	var s heapSnap
	runtime.ReadMemStats(&s.ms)
	n, _ := runtime.MemProfile(nil, true)
	recs := make([]runtime.MemProfileRecord, n+64)
	n, ok := runtime.MemProfile(recs, true)
	if !ok {
		panic("memory profile grew past its margin")
	}
	s.sites = make(map[[32]uintptr]runtime.MemProfileRecord, n)
	for _, r := range recs[:n] {
		s.sites[r.Stack0] = r
	}
	return s
}

// memPart is a row of the table: a part of a connection's memory and the
// functions whose allocations (the innermost petrel or nbio frame of the
// stack that matches) are counted in it.
type memPart struct {
	name  string
	match []string
}

// memParts lists the parts, each with the functions (prefixes of
// runtime function names) whose allocations it counts. A stack is counted
// in the part of the innermost frame that matches any part.
var memParts = []memPart{
	{"out-queue (segments)", []string{"github.com/petrel-relay/petrel/internal/relay.(*outbox)", "github.com/petrel-relay/petrel/internal/relay.newSeg"}},
	{"subscription index entries", []string{"github.com/petrel-relay/petrel/internal/relay.(*index)", "github.com/petrel-relay/petrel/internal/relay.put", "github.com/petrel-relay/petrel/internal/relay.bucketFor", "github.com/petrel-relay/petrel/internal/relay.(*bucket)"}},
	{"subscription and its filter", []string{"github.com/petrel-relay/petrel/internal/relay.(*Session).handleReq", "github.com/petrel-relay/petrel/internal/relay.(*sub)", "github.com/petrel-relay/petrel/internal/relay.(*subList)", "github.com/petrel-relay/petrel/internal/nostr."}},
	{"session registry", []string{"github.com/petrel-relay/petrel/internal/relay.(*Relay).register"}},
	{"sweeper's session list", []string{"github.com/petrel-relay/petrel/internal/relay.(*Relay).forEachSessionBuf", "github.com/petrel-relay/petrel/internal/relay.(*Relay).sweep"}},
	{"session", []string{"github.com/petrel-relay/petrel/internal/relay.(*Relay).NewSession"}},
	{"connection slot", []string{"github.com/petrel-relay/petrel/internal/server.(*slots)"}},
	{"transport", []string{"github.com/petrel-relay/petrel/internal/server.(*Server).upgrade"}},
	{"WebSocket connection (nbio)", []string{"github.com/lesismal/nbio/nbhttp/websocket."}},
	{"HTTP parser and conn (nbio)", []string{"github.com/lesismal/nbio/nbhttp."}},
	{"TCP connection (nbio)", []string{"github.com/lesismal/nbio."}},
	{"other relay", []string{"github.com/petrel-relay/petrel/internal/relay."}},
	{"other server", []string{"github.com/petrel-relay/petrel/internal/server."}},
}

// Parts that are not the relay's per connection: the test's own
// allocations (its profile records, the clients' descriptors) and the
// store's (an event written). They are shown and left out of the total.
const (
	partTest       = "(the test itself)"
	partStore      = "(the store)"
	partGoroutines = "(goroutines started)"
)

// classify returns the part of stack and the function that allocated
// (the innermost frame outside the runtime).
func classify(stack []uintptr) (part, site string) {
	frames := runtime.CallersFrames(stack)
	for {
		f, more := frames.Next()
		fn := f.Function
		if site == "" && !strings.HasPrefix(fn, "runtime.") && !strings.HasPrefix(fn, "internal/") {
			site = fn
			switch {
			case strings.HasPrefix(fn, "github.com/petrel-relay/petrel/internal/server_test."):
				return partTest, site
			case strings.HasPrefix(fn, "github.com/petrel-relay/petrel/internal/store/"),
				strings.HasPrefix(fn, "github.com/cockroachdb/"):
				return partStore, site
			}
		}
		for _, p := range memParts {
			for _, m := range p.match {
				if strings.HasPrefix(fn, m) {
					return p.name, site
				}
			}
		}
		if fn == "runtime.malg" {
			// A goroutine's descriptor, kept by the runtime for reuse:
			// as many as ran at once, not one per connection.
			return partGoroutines, "runtime.malg"
		}
		if !more {
			if site == "" {
				site = stackLeaf(stack)
			}
			return "unattributed", site
		}
	}
}

// partBytes is one part's growth between two snapshots.
type partBytes struct {
	bytes, objects int64
	sites          map[string]int64
}

// heapGrowth attributes the in-use heap that grew from a to b to the
// parts.
func heapGrowth(a, b heapSnap) map[string]*partBytes {
	out := map[string]*partBytes{}
	for k, r := range b.sites {
		db := r.InUseBytes()
		do := r.InUseObjects()
		if p, ok := a.sites[k]; ok {
			db -= p.InUseBytes()
			do -= p.InUseObjects()
		}
		if db == 0 && do == 0 {
			continue
		}
		part, site := classify(r.Stack())
		if os.Getenv("PETREL_IDLEMEM_STACKS") != "" && db > 2000 {
			fmt.Printf("%s %d bytes %d objects:\n", part, db, do)
			frames := runtime.CallersFrames(r.Stack())
			for {
				f, more := frames.Next()
				fmt.Printf("\t%s:%d\n", f.Function, f.Line)
				if !more {
					break
				}
			}
		}
		pb := out[part]
		if pb == nil {
			pb = &partBytes{sites: map[string]int64{}}
			out[part] = pb
		}
		pb.bytes += db
		pb.objects += do
		pb.sites[site] += db
	}
	for k, r := range a.sites { // sites freed since a
		if _, ok := b.sites[k]; ok || r.InUseBytes() == 0 {
			continue
		}
		part, site := classify(r.Stack())
		pb := out[part]
		if pb == nil {
			pb = &partBytes{sites: map[string]int64{}}
			out[part] = pb
		}
		pb.bytes -= r.InUseBytes()
		pb.objects -= r.InUseObjects()
		pb.sites[site] -= r.InUseBytes()
	}
	return out
}

// growthTable formats the growth per connection, largest part first.
func growthTable(g map[string]*partBytes, n int) (string, float64) {
	names := make([]string, 0, len(g))
	var total int64
	for k, v := range g {
		names = append(names, k)
		if k != partTest && k != partStore && k != partGoroutines {
			total += v.bytes
		}
	}
	sort.Slice(names, func(i, j int) bool { return g[names[i]].bytes > g[names[j]].bytes })
	var b strings.Builder
	fmt.Fprintf(&b, "%-30s %10s %8s  %s\n", "part", "B/conn", "obj/conn", "allocated in (B/conn)")
	for _, k := range names {
		v := g[k]
		type st struct {
			s string
			n int64
		}
		var sites []st
		for s, b := range v.sites {
			sites = append(sites, st{s, b})
		}
		sort.Slice(sites, func(i, j int) bool { return sites[i].n > sites[j].n })
		var ss []string
		for _, s := range sites {
			if len(ss) == 4 {
				break
			}
			per := float64(s.n) / float64(n)
			if per < 1 && per > -1 {
				continue
			}
			ss = append(ss, fmt.Sprintf("%s %.0f", strings.TrimPrefix(strings.TrimPrefix(s.s, "github.com/petrel-relay/petrel/internal/"), "github.com/lesismal/"), per))
		}
		fmt.Fprintf(&b, "%-30s %10.1f %8.2f  %s\n", k, float64(v.bytes)/float64(n), float64(v.objects)/float64(n), strings.Join(ss, "; "))
	}
	fmt.Fprintf(&b, "%-30s %10.1f\n", "total, the relay's", float64(total)/float64(n))
	return b.String(), float64(total) / float64(n)
}

// TestIdleConnectionMemory opens idleMemConns subscribed connections
// (one REQ each, kinds [1] and one author, as `petrel bench conns`
// sends), lets them go idle past EOSE, and measures the relay's heap per
// connection by part. It then checks that what an idle connection does
// later leaves nothing behind: after the relay's idle ping and the
// client's pong, and after a live event delivered to every connection,
// the heap per connection is back where it was and no connection holds
// an out-queue buffer.
//
// PETREL_IDLEMEM_CONNS sets the number of connections (default 1000);
// PETREL_IDLEMEM_STACKS=1 prints the whole stack of every allocation
// site that grew by over 2,000 bytes.
func TestIdleConnectionMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("opens a thousand connections")
	}
	conns := 1000
	if v := os.Getenv("PETREL_IDLEMEM_CONNS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("PETREL_IDLEMEM_CONNS=%q", v)
		}
		conns = n
	}
	old := runtime.MemProfileRate
	runtime.MemProfileRate = 1
	defer func() { runtime.MemProfileRate = old }()

	var skew atomic.Int64 // the relay's clock runs this far ahead
	now := func() time.Time { return time.Now().Add(time.Duration(skew.Load())) }
	rl := relaytest.Start(t, relaytest.Options{
		// The sweeper runs every DrainTimeout/6; a drain deadline of
		// 6 s leaves a loaded machine's flushers room to write.
		Relay: relay.Config{IdleTimeout: time.Hour, DrainTimeout: 6 * time.Second},
		Now:   now,
	})
	ap := netip.MustParseAddrPort(rl.Server.Addr().String())
	author := relaytest.NewKey("idle-memory")
	filter := `{"kinds":[1],"authors":["` + author.PK.Hex() + `"],"since":` + strconv.FormatInt(time.Now().Unix(), 10) + `,"limit":0}`
	var buf []byte
	open := func(n int) []sockClient {
		cs := make([]sockClient, n)
		for i := range cs {
			cs[i] = dialSock(t, ap)
			id := "c" + strconv.Itoa(i)
			cs[i].write(t, rawFrame(0x81, true, []byte(`["REQ","`+id+`",`+filter+`]`)))
		}
		for i, c := range cs {
			c.expect(t, &buf, 0x1, `["EOSE","c`+strconv.Itoa(i)+`"]`)
		}
		return cs
	}
	closeAll := func(cs []sockClient) {
		for _, c := range cs {
			c.close()
		}
	}
	waitSessions := func(n int) {
		t.Helper()
		for deadline := time.Now().Add(20 * time.Second); rl.Relay.Sessions() != n; time.Sleep(5 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%d sessions; want %d", rl.Relay.Sessions(), n)
			}
		}
	}
	// Warm up: the pools, maps and lists that outlive a connection reach
	// the size they will have.
	closeAll(open(min(conns, 200)))
	waitSessions(0)

	base := snapHeap()
	cs := open(conns)
	defer closeAll(cs)
	waitSessions(conns)
	idle := snapHeap()
	growth := heapGrowth(base, idle)
	table, _ := growthTable(growth, conns)
	var own int64
	if p := growth[partTest]; p != nil {
		own = p.bytes
	}
	heapPer := float64(int64(idle.ms.HeapAlloc)-int64(base.ms.HeapAlloc)-own) / float64(conns)
	stackPer := float64(int64(idle.ms.StackInuse)-int64(base.ms.StackInuse)) / float64(conns)
	t.Logf("%d idle subscribed connections, relay heap growth per connection:\n%sMemStats: HeapAlloc %+.1f B/conn (less the test's own), StackInuse %+.1f B/conn",
		conns, table, heapPer, stackPer)
	if n, b := rl.Relay.OutQueueBuffers(); n != 0 {
		t.Errorf("after EOSE: %d connections hold %d bytes of out-queue buffers; want none", n, b)
	}

	// tolerance bounds what may stay per connection after an exchange
	// with every connection. What stays that is not per connection (a
	// relay-wide list grown once, descriptors of the goroutines that
	// ran) measured -7 to +28 bytes a connection at a thousand; a buffer
	// kept per connection is far over it (an out-queue segment is over
	// 1 KiB: the old out-queue measured +788 bytes after the ping).
	const tolerance = 64.0
	after := func(what string) {
		t.Helper()
		if n, b := rl.Relay.OutQueueBuffers(); n != 0 {
			t.Errorf("%s: %d connections hold %d bytes of out-queue buffers; want none", what, n, b)
		}
		s := snapHeap()
		table, per := growthTable(heapGrowth(idle, s), conns)
		t.Logf("%s: heap growth per connection since idle:\n%s", what, table)
		if per > tolerance {
			t.Errorf("%s: the relay holds %.1f bytes more per connection than when idle (tolerance %.0f)", what, per, tolerance)
		}
	}

	// The idle ping: the relay's clock moves past half the idle timeout,
	// the sweeper pings every connection, and each answers.
	skew.Store(int64(31 * time.Minute))
	for _, c := range cs {
		c.expect(t, &buf, 0x9, "")
		c.write(t, rawFrame(0x8a, true, nil))
	}
	waitQuiet(t, rl.Relay)
	after("after the idle ping and pong")

	// A live event to every subscription, on the real clock again (the
	// connections' last reads are now in its future: no more pings).
	skew.Store(0)
	pub := dialSock(t, ap)
	ev := author.Event(1, "to every idle connection", nil, now().Unix())
	msg := append(nostr.AppendEvent([]byte(`["EVENT",`), ev), ']')
	pub.write(t, rawFrame(0x81, true, msg))
	pub.expect(t, &buf, 0x1, `["OK","`+ev.ID.Hex()+`",true`)
	for i, c := range cs {
		c.expect(t, &buf, 0x1, `["EVENT","c`+strconv.Itoa(i)+`",{"id":"`+ev.ID.Hex())
	}
	pub.close()
	waitSessions(conns)
	waitQuiet(t, rl.Relay)
	after("after a live event to each")
}

// waitQuiet waits until nothing is queued or in flight on the relay's
// out-queues, so that a measurement sees them drained.
func waitQuiet(t testing.TB, r *relay.Relay) {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); !r.OutQueuesIdle(); time.Sleep(2 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("out-queues still busy: %d bytes", r.OutQueueBytes())
		}
	}
}

// stackLeaf names the outermost frame of a stack that has only runtime
// frames (an allocation of the runtime's own, a goroutine's start).
func stackLeaf(stack []uintptr) string {
	frames := runtime.CallersFrames(stack)
	name := ""
	for {
		f, more := frames.Next()
		name = f.Function
		if !more {
			return name
		}
	}
}
