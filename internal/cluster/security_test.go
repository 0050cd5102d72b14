package cluster

// The bus's security: a node authenticates to a NATS server that requires
// it (a password or token in the URL, an nkey seed, a credentials file for
// a server in operator mode) and speaks TLS to one that requires it,
// verifying the server and showing a client certificate; what it logs
// never holds a password. Each test runs a private nats-server configured
// for it.

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"log/slog"
	"math/big"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nkeys"

	"github.com/petrel-relay/petrel/internal/relaytest"
)

// configuredNATS is a private nats-server started with a configuration
// file.
type configuredNATS struct {
	port int
	file string
	cmd  *exec.Cmd
}

// reload rewrites the server's configuration (conf as startNATSConfig
// takes it) and has the server read it again (SIGHUP).
func (s *configuredNATS) reload(t testing.TB, conf string) {
	t.Helper()
	conf = "listen: 127.0.0.1:" + strconv.Itoa(s.port) + "\n" + conf
	if err := os.WriteFile(s.file, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := s.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
}

// startNATSConfig starts a private nats-server on a loopback port with
// conf (the listen line is added here) and returns its port.
func startNATSConfig(t testing.TB, conf string) int {
	return startConfiguredNATS(t, conf).port
}

func startConfiguredNATS(t testing.TB, conf string) *configuredNATS {
	t.Helper()
	p := startNATS(t) // finds the binary and a free port; replaced below
	p.Kill()
	dir := t.TempDir()
	file := filepath.Join(dir, "nats.conf")
	conf = "listen: 127.0.0.1:" + strconv.Itoa(p.port) + "\n" + conf
	if err := os.WriteFile(file, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(p.bin, "-c", file)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatalf("start nats-server: %v", err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	deadline := time.Now().Add(15 * time.Second)
	for {
		c, err := net.Dial("tcp", "127.0.0.1:"+strconv.Itoa(p.port))
		if err == nil {
			c.Close()
			return &configuredNATS{port: p.port, file: file, cmd: cmd}
		}
		if time.Now().After(deadline) {
			t.Fatalf("nats-server with %s did not come up: %v\n%s", file, err, out.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// logTo makes a node's bridge log into l.
func logTo(l *relaytest.SyncBuffer) func(*Options) {
	return func(o *Options) { o.Logger = slog.New(slog.NewTextHandler(l, nil)) }
}

// both applies tweaks in turn.
func both(tweaks ...func(*Options)) func(*Options) {
	return func(o *Options) {
		for _, f := range tweaks {
			f(o)
		}
	}
}

// crossBus checks that an event accepted on a reaches b's subscriber
// over the bus (not a catch-up), once.
func crossBus(t *testing.T, a, b *node) {
	t.Helper()
	alice := relaytest.NewKey("security " + t.Name())
	sub := subscribe(t, b, alice)
	ev := alice.Note("over a private bus")
	relaytest.Dial(t, a.r.URL).MustPublish(ev)
	sub.until(ev)
	sub.fence(b, alice)
	sub.exactlyOnce(ev)
	if s := b.b.Stats(); s.Received != 1 || s.CaughtUp != 0 {
		t.Fatalf("b received %d over the bus and caught up %d, want the event over the bus", s.Received, s.CaughtUp)
	}
}

// refused checks that n never connects: the server turned it away (a
// log line says it cannot reach the bus, and why), and it is still not
// connected.
func refused(t *testing.T, n *node, log *relaytest.SyncBuffer, reason string) {
	t.Helper()
	waitFor(t, n.name+" turned away", func() bool {
		for _, line := range strings.Split(strings.ToLower(log.String()), "\n") {
			if strings.Contains(line, "cannot reach the bus") && strings.Contains(line, reason) {
				return true
			}
		}
		return false
	})
	if n.b.Stats().Connected {
		t.Fatalf("%s connected", n.name)
	}
}

// TestBusPassword: a server that requires a user and password, with the
// permissions docs/operations.md gives a node (the bus's subject and the
// ones under it, nothing else): nodes with the password in the URL carry
// events to each other (their side subjects too: no permission error),
// a node with a wrong one is turned away, and no log line holds either
// password.
func TestBusPassword(t *testing.T) {
	skipWithoutNATS(t)
	subject := testSubject(t)
	perm := `["` + subject + `", "` + subject + `.>"]`
	users := `{ user: petrel, password: "right-pw-7f3a", permissions: { publish: ` + perm + `, subscribe: ` + perm + ` } }`
	srv := startConfiguredNATS(t, "authorization { users: [ "+users+" ] }\n")
	url := "nats://petrel:right-pw-7f3a@127.0.0.1:" + strconv.Itoa(srv.port)
	var log relaytest.SyncBuffer
	st := sharedStore(t)
	a := startNode(t, url, "a", subject, st, logTo(&log))
	b := startNode(t, url, "b", subject, st, logTo(&log))
	waitConnected(t, a, b)
	crossBus(t, a, b)
	// The rate and connection shares and the policy hints go on side
	// subjects: the permissions let them through.
	a.b.ShareRates([]byte{1})
	a.b.ShareConns([]byte{1})
	a.b.HintPolicy()
	waitFor(t, "b hearing a's side messages", func() bool {
		s := b.b.Stats()
		return s.RateSharesReceived >= 1 && s.ConnSharesReceived >= 1 && s.PolicyHintsReceived >= 1
	})

	c := startNode(t, strings.Replace(url, "petrel:right-pw", "late:wrong-pw", 1), "c", subject, st, logTo(&log))
	refused(t, c, &log, "authorization violation")
	// c keeps trying (NATS alone gives up after two refusals), having
	// logged the reason once: its user, added on the server, lets it in.
	time.Sleep(300 * time.Millisecond) // several attempts at ReconnectWait 50 ms
	if n := strings.Count(log.String(), "cannot reach the bus"); n != 1 {
		t.Fatalf("c's failures logged %d times, want once (the same reason):\n%s", n, log.String())
	}
	srv.reload(t, "authorization { users: [ "+users+`, { user: late, password: "wrong-pw-7f3a" } ] }`+"\n")
	waitConnected(t, a, b, c)
	for _, line := range strings.Split(log.String(), "\n") {
		if strings.Contains(line, "-pw-7f3a") {
			t.Fatalf("a password in the log: %s", line)
		}
		if strings.Contains(strings.ToLower(line), "permission") {
			t.Fatalf("a permission error: %s", line)
		}
	}
	if !strings.Contains(log.String(), "late:xxxxx@127.0.0.1") {
		t.Fatalf("c's retries not logged with the URL redacted:\n%s", log.String())
	}
}

// TestBusNKey: a server that knows a user by its public nkey: nodes with
// the seed file carry events to each other; a node without it is turned
// away.
func TestBusNKey(t *testing.T) {
	skipWithoutNATS(t)
	user, err := nkeys.CreateUser()
	if err != nil {
		t.Fatal(err)
	}
	pub, _ := user.PublicKey()
	seed, _ := user.Seed()
	seedFile := filepath.Join(t.TempDir(), "petrel.nk")
	if err := os.WriteFile(seedFile, append(seed, '\n'), 0o600); err != nil {
		t.Fatal(err)
	}
	port := startNATSConfig(t, "authorization { users: [ { nkey: "+pub+" } ] }\n")
	authenticated(t, port, func(o *Options) { o.NKeySeed = seedFile })
}

// authenticated checks, on the server at port, that two nodes with auth
// carry events to each other, and that a node without it is turned away.
func authenticated(t *testing.T, port int, auth func(*Options)) {
	t.Helper()
	url := "nats://127.0.0.1:" + strconv.Itoa(port)
	subject, st := testSubject(t), sharedStore(t)
	a := startNode(t, url, "a", subject, st, auth)
	b := startNode(t, url, "b", subject, st, auth)
	waitConnected(t, a, b)
	crossBus(t, a, b)
	var log relaytest.SyncBuffer
	c := startNode(t, url, "c", subject, st, logTo(&log))
	refused(t, c, &log, "authorization violation")
}

// TestBusCredentials: a server in operator (JWT) mode: nodes with a
// credentials file (the user's JWT, signed by its account, and its seed)
// carry events to each other; a node without it is turned away.
func TestBusCredentials(t *testing.T) {
	skipWithoutNATS(t)
	operator, _ := nkeys.CreateOperator()
	opPub, _ := operator.PublicKey()
	opJWT, err := jwt.NewOperatorClaims(opPub).Encode(operator)
	if err != nil {
		t.Fatal(err)
	}
	account, _ := nkeys.CreateAccount()
	accPub, _ := account.PublicKey()
	accJWT, err := jwt.NewAccountClaims(accPub).Encode(operator)
	if err != nil {
		t.Fatal(err)
	}
	user, _ := nkeys.CreateUser()
	userPub, _ := user.PublicKey()
	uc := jwt.NewUserClaims(userPub)
	uc.Name = "petrel"
	userJWT, err := uc.Encode(account)
	if err != nil {
		t.Fatal(err)
	}
	seed, _ := user.Seed()
	creds, err := jwt.FormatUserConfig(userJWT, seed)
	if err != nil {
		t.Fatal(err)
	}
	credsFile := filepath.Join(t.TempDir(), "petrel.creds")
	if err := os.WriteFile(credsFile, creds, 0o600); err != nil {
		t.Fatal(err)
	}
	port := startNATSConfig(t, "operator: "+opJWT+"\nresolver: MEMORY\nresolver_preload: { "+accPub+": "+accJWT+" }\n")
	authenticated(t, port, func(o *Options) { o.Credentials = credsFile })
}

// testCA is a certificate authority made for one test.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	dir  string
}

func newTestCA(t testing.TB) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "petrel test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	ca := &testCA{cert: cert, key: key, dir: t.TempDir()}
	ca.write(t, "ca.pem", "CERTIFICATE", der)
	return ca
}

func (ca *testCA) write(t testing.TB, name, typ string, der []byte) string {
	t.Helper()
	f := filepath.Join(ca.dir, name)
	if err := os.WriteFile(f, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	return f
}

// issue makes a certificate and key signed by ca, for a server at
// 127.0.0.1 or for a client; it returns their files.
func (ca *testCA) issue(t testing.TB, name string, server bool) (certFile, keyFile string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	if server {
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
		tmpl.IPAddresses = []net.IP{net.IPv4(127, 0, 0, 1)}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return ca.write(t, name+".pem", "CERTIFICATE", der), ca.write(t, name+"-key.pem", "EC PRIVATE KEY", kder)
}

// TestBusTLS: a server that speaks only TLS and verifies its clients'
// certificates: nodes that trust its CA and show a certificate it signed
// carry events to each other (over a nats:// URL: the options make the
// connection TLS); a node without a client certificate, or one that does
// not trust the server's CA, never connects.
func TestBusTLS(t *testing.T) {
	skipWithoutNATS(t)
	ca := newTestCA(t)
	srvCert, srvKey := ca.issue(t, "server", true)
	cliCert, cliKey := ca.issue(t, "client", false)
	caFile := filepath.Join(ca.dir, "ca.pem")
	port := startNATSConfig(t, `tls {
  cert_file: "`+srvCert+`"
  key_file: "`+srvKey+`"
  ca_file: "`+caFile+`"
  verify: true
  timeout: 2
}
`)
	url := "nats://127.0.0.1:" + strconv.Itoa(port)
	subject, st := testSubject(t), sharedStore(t)
	mutual := func(o *Options) { o.TLSCA, o.TLSCert, o.TLSKey = caFile, cliCert, cliKey }
	a := startNode(t, url, "a", subject, st, mutual)
	b := startNode(t, url, "b", subject, st, mutual)
	waitConnected(t, a, b)
	crossBus(t, a, b)

	var noCert, noCA relaytest.SyncBuffer
	c := startNode(t, url, "c", subject, st, both(logTo(&noCert), func(o *Options) { o.TLSCA = caFile }))
	d := startNode(t, url, "d", subject, st, both(logTo(&noCA), func(o *Options) { o.TLSCert, o.TLSKey = cliCert, cliKey }))
	refused(t, c, &noCert, "tls") // the server's alert, or its close after the handshake
	refused(t, d, &noCA, "unknown authority")
	time.Sleep(300 * time.Millisecond) // several attempts at ReconnectWait 50 ms
	if c.b.Stats().Connected || d.b.Stats().Connected {
		t.Fatalf("connected without a client certificate (%v) or without the CA (%v)", c.b.Stats().Connected, d.b.Stats().Connected)
	}
}

// TestCheckSecurity: each kind of bad credentials or TLS file is refused
// by Check and New with ErrOptions and a message naming it; good ones
// pass.
func TestCheckSecurity(t *testing.T) {
	dir := t.TempDir()
	ca := newTestCA(t)
	cert, key := ca.issue(t, "client", false)
	caFile := filepath.Join(ca.dir, "ca.pem")
	user, _ := nkeys.CreateUser()
	seed, _ := user.Seed()
	seedFile := filepath.Join(dir, "user.nk")
	os.WriteFile(seedFile, seed, 0o600)
	account, _ := nkeys.CreateAccount()
	accSeed, _ := account.Seed()
	accFile := filepath.Join(dir, "account.nk")
	os.WriteFile(accFile, accSeed, 0o600)
	userPub, _ := user.PublicKey()
	userJWT, _ := jwt.NewUserClaims(userPub).Encode(account)
	creds, _ := jwt.FormatUserConfig(userJWT, seed)
	credsFile := filepath.Join(dir, "user.creds")
	os.WriteFile(credsFile, creds, 0o600)
	jwtOnly := filepath.Join(dir, "jwt-only.creds")
	os.WriteFile(jwtOnly, []byte("-----BEGIN NATS USER JWT-----\n"+userJWT+"\n------END NATS USER JWT------\n"), 0o600)
	garbage := filepath.Join(dir, "garbage")
	os.WriteFile(garbage, []byte("not a key\n"), 0o600)
	missing := filepath.Join(dir, "missing")

	for _, c := range []struct {
		name string
		o    Options
		want string // "" passes
	}{
		{"none", Options{}, ""},
		{"all good", Options{Credentials: credsFile, TLSCA: caFile, TLSCert: cert, TLSKey: key}, ""},
		{"nkey seed", Options{NKeySeed: seedFile}, ""},
		{"both user auths", Options{Credentials: credsFile, NKeySeed: seedFile}, "not both"},
		{"credentials missing", Options{Credentials: missing}, "credentials " + missing},
		{"credentials without a seed", Options{Credentials: jwtOnly}, "no user nkey seed"},
		{"credentials garbage", Options{Credentials: garbage}, "credentials " + garbage},
		{"seed missing", Options{NKeySeed: missing}, "nkey seed " + missing},
		{"seed of an account", Options{NKeySeed: accFile}, "not a user nkey seed"},
		{"seed garbage", Options{NKeySeed: garbage}, "not a user nkey seed"},
		{"CA missing", Options{TLSCA: missing}, "TLS CA " + missing},
		{"CA garbage", Options{TLSCA: garbage}, "no PEM certificate"},
		{"cert without key", Options{TLSCert: cert}, "needs its key"},
		{"key without cert", Options{TLSKey: key}, "needs its key"},
		{"cert with the wrong key", Options{TLSCert: cert, TLSKey: caFile}, "TLS client certificate " + cert},
	} {
		err := c.o.checkSecurity()
		if c.want == "" {
			if err != nil {
				t.Errorf("%s: %v", c.name, err)
			}
			continue
		}
		if !errors.Is(err, ErrOptions) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want ErrOptions with %q", c.name, err, c.want)
		}
		o := c.o
		o.URL, o.Node, o.Feed = "nats://127.0.0.1:1", "n", sharedStore(t)
		if _, err := New(o); !errors.Is(err, ErrOptions) {
			t.Errorf("%s: New: %v", c.name, err)
		}
	}
}

// TestRedactURL: passwords and tokens are hidden, in every URL of a list;
// the rest is kept.
func TestRedactURL(t *testing.T) {
	for in, want := range map[string]string{
		"nats://127.0.0.1:4222":                              "nats://127.0.0.1:4222",
		"nats://petrel:s3cret@nats.internal:4222":            "nats://petrel:xxxxx@nats.internal:4222",
		"tls://TOKEN123@nats.internal:4222":                  "tls://xxxxx@nats.internal:4222",
		"nats://u:p@a:4222, nats://u:p@b:4222,nats://c:4222": "nats://u:xxxxx@a:4222,nats://u:xxxxx@b:4222,nats://c:4222",
		"u:p@h:4222":          "u:xxxxx@h:4222",
		"nats://u:p@ss@h:1":   "nats://u:xxxxx@h:1",
		"nats://u:@h:1":       "nats://u:xxxxx@h:1",
		"":                    "",
		"nats://[::1]:4222":   "nats://[::1]:4222",
		"nats://t@[::1]:4222": "nats://xxxxx@[::1]:4222",
	} {
		if got := RedactURL(in); got != want {
			t.Errorf("RedactURL(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestBusErrorsLogged: NATS's asynchronous errors (here a server that lets
// a node publish on the bus's subject but not on the ones under it) are
// logged with their reason, once a minute at most however often they
// come, so a misconfiguration does not flood the log.
func TestBusErrorsLogged(t *testing.T) {
	skipWithoutNATS(t)
	subject := testSubject(t)
	perm := `["` + subject + `"]`
	port := startNATSConfig(t, `authorization {
  users: [ { user: petrel, password: "pw", permissions: { publish: `+perm+`, subscribe: `+perm+` } } ]
}
`)
	var log relaytest.SyncBuffer
	a := startNode(t, "nats://petrel:pw@127.0.0.1:"+strconv.Itoa(port), "a", subject, sharedStore(t), logTo(&log))
	waitFor(t, "a connected", func() bool { return a.b.Stats().Connected })
	for range 50 {
		a.b.ShareRates([]byte{1})
	}
	a.b.HintPolicy()
	if err := a.b.nc.Flush(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the violations logged", func() bool { return strings.Contains(log.String(), subject+".policy") })
	time.Sleep(200 * time.Millisecond) // let the rest of the server's errors arrive
	lines := strings.Split(log.String(), "\n")
	var rates int
	for _, l := range lines {
		if strings.Contains(l, "Permissions Violation for Publish to \\\""+subject+".rates") {
			rates++
		}
	}
	if rates != 1 {
		t.Fatalf("the .rates violation logged %d times, want once:\n%s", rates, log.String())
	}
	// Each is counted: the three subscriptions refused, the 50 shares
	// and the hint.
	if s := a.b.Stats(); s.BusErrors < 3+50+1 {
		t.Fatalf("bus_errors %d, want at least 54", s.BusErrors)
	}
}

// TestBusShareTooLarge: a share larger than the server's max_payload is
// not sent, and that is counted and logged (once a minute), not lost
// unseen.
func TestBusShareTooLarge(t *testing.T) {
	skipWithoutNATS(t)
	port := startNATSConfig(t, "max_payload: 4096\n")
	var log relaytest.SyncBuffer
	a := startNode(t, "nats://127.0.0.1:"+strconv.Itoa(port), "a", testSubject(t), sharedStore(t), logTo(&log))
	waitFor(t, "a connected", func() bool { return a.b.Stats().Connected })
	a.b.ShareRates(make([]byte, 1024)) // fits
	for range 3 {
		a.b.ShareConns(make([]byte, 8192))
	}
	s := a.b.Stats()
	if s.RateSharesSent != 1 || s.ConnSharesSent != 0 || s.BusErrors != 3 {
		t.Fatalf("rate shares sent %d, conn shares sent %d, bus errors %d; want 1, 0, 3", s.RateSharesSent, s.ConnSharesSent, s.BusErrors)
	}
	if n := strings.Count(log.String(), "maximum payload exceeded"); n != 1 {
		t.Fatalf("logged %d times, want once:\n%s", n, log.String())
	}
}

// TestBusMaxPayloadSmall: a node whose NATS server's max_payload (4 KB
// here) cannot carry the largest event its relay accepts says so once
// in its log at connect: one byte past what fits with the envelope, a
// warning; at it, none. An event past max_payload is not sent on the
// bus, yet reaches the other node's subscriber, from the store, once.
func TestBusMaxPayloadSmall(t *testing.T) {
	skipWithoutNATS(t)
	const maxPayload = 4096
	url := "nats://127.0.0.1:" + strconv.Itoa(startNATSConfig(t, "max_payload: "+strconv.Itoa(maxPayload)+"\n"))
	subject, st := testSubject(t), sharedStore(t)
	var logA, logB relaytest.SyncBuffer
	maxEvent := func(n int) func(*Options) { return func(o *Options) { o.MaxEventBytes = n } }
	fits := maxPayload - envelopeHeader(originHeader("a", 0, 0)) // "a" and "b": one length
	a := startNode(t, url, "a", subject, st, both(logTo(&logA), maxEvent(fits+1)))
	b := startNode(t, url, "b", subject, st, both(logTo(&logB), maxEvent(fits)))
	waitConnected(t, a, b)
	const warning = "max_payload is under the largest event"
	if n := strings.Count(logA.String(), warning); n != 1 {
		t.Fatalf("a warned %d times, want once:\n%s", n, logA.String())
	}
	if !strings.Contains(logA.String(), "max_payload=4096") {
		t.Fatalf("a's warning does not give max_payload:\n%s", logA.String())
	}
	if strings.Contains(logB.String(), warning) {
		t.Fatalf("b warned with events that fit exactly:\n%s", logB.String())
	}

	alice := relaytest.NewKey("max payload " + t.Name())
	sub := subscribe(t, b, alice)
	ev := alice.Note(strings.Repeat("large ", 1000)) // ~6 KB
	if len(ev.Raw) <= 4096 {
		t.Fatalf("the event is %d bytes, not past max_payload", len(ev.Raw))
	}
	relaytest.Dial(t, a.r.URL).MustPublish(ev)
	sub.until(ev)
	sub.fence(b, alice)
	sub.exactlyOnce(ev)
	if s := a.b.Stats(); s.Published != 0 || s.PublishDrops != 1 {
		t.Fatalf("a published %d and dropped %d, want the event dropped from the bus", s.Published, s.PublishDrops)
	}
	if s := b.b.Stats(); s.CaughtUp < 1 {
		t.Fatalf("b caught up %d events, want the large one from the store", s.CaughtUp)
	}
}

// TestSecurity: what the start-up line says of a node's way to the bus,
// without a secret.
func TestSecurity(t *testing.T) {
	for _, c := range []struct {
		o    Options
		want string
	}{
		{Options{URL: "nats://10.0.0.5:4222"}, "no authentication, no TLS"},
		{Options{URL: "nats://petrel:s3cr3t-pw@10.0.0.5:4222"}, "password in the URL, no TLS"},
		{Options{URL: "tls://s3cr3t-tok@nats:4222"}, "token in the URL, TLS"},
		{Options{URL: "nats://nats:4222", NKeySeed: "/etc/petrel/nats.nk", TLSCA: "/etc/petrel/ca.pem"}, "nkey, TLS"},
		{Options{URL: "nats://nats:4222", Credentials: "/etc/petrel/nats.creds", TLSCert: "c.pem", TLSKey: "k.pem"}, "credentials file, TLS with a client certificate"},
	} {
		got := c.o.Security()
		if got != c.want {
			t.Errorf("%+v: %q, want %q", c.o, got, c.want)
		}
		if strings.Contains(got, "s3cr3t") {
			t.Errorf("%q holds a secret", got)
		}
	}
}

// TestLogLimit: a message passes once a minute (just under a minute
// later: held back; at a minute: passes again), other messages pass
// meanwhile, reset lets it pass at once, and the messages remembered are
// bounded (at 64 kept; the 65th starts afresh).
func TestLogLimit(t *testing.T) {
	var l logLimit
	t0 := time.Unix(1_700_000_000, 0)
	if !l.allow("a", t0) || l.allow("a", t0.Add(time.Minute-time.Nanosecond)) || !l.allow("a", t0.Add(time.Minute)) {
		t.Fatal("a message not passed once a minute")
	}
	if !l.allow("b", t0.Add(time.Minute)) {
		t.Fatal("another message held back")
	}
	l.reset()
	if !l.allow("a", t0.Add(time.Minute)) {
		t.Fatal("held back after reset")
	}
	for i := range 63 { // a and 63 more: 64 kept
		l.allow(strconv.Itoa(i), t0.Add(time.Minute))
	}
	if len(l.last) != 64 || l.allow("a", t0.Add(time.Minute)) {
		t.Fatalf("at 64 messages: %d kept, a passed again", len(l.last))
	}
	if !l.allow("65th", t0.Add(time.Minute)) || len(l.last) != 1 {
		t.Fatalf("past 64: %d kept, want a fresh start", len(l.last))
	}
}
