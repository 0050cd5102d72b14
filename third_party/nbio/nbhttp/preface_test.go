package nbhttp

import (
	"bufio"
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	stdtls "crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"io"
	"math/big"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/lesismal/llib/std/crypto/tls"
	"github.com/lesismal/nbio"
)

// takePreface returns an OnOpen handler that wraps each connection's
// data handler to take a line ("...\n") from the start of the
// connection, possibly split over several reads, and send it on lines;
// then it puts the handler back and hands it the bytes after the line.
// A connection opened without a data handler is reported on lines as
// "no handler".
func takePreface(lines chan<- string) func(net.Conn) {
	return func(c net.Conn) {
		nbc, ok := c.(*nbio.Conn)
		if !ok {
			lines <- "not an *nbio.Conn"
			return
		}
		next := nbc.DataHandler()
		if next == nil {
			lines <- "no handler"
			return
		}
		var line []byte
		nbc.OnData(func(c *nbio.Conn, data []byte) {
			i := bytes.IndexByte(data, '\n')
			if i < 0 {
				line = append(line, data...)
				return
			}
			line = append(line, data[:i]...)
			lines <- string(line)
			c.OnData(next)
			if rest := data[i+1:]; len(rest) > 0 {
				next(c, rest)
			}
		})
	}
}

// writeSlowly writes the parts of b split at the given offsets, pausing
// between them so that the server reads them separately.
func writeSlowly(t *testing.T, w io.Writer, b string, at ...int) {
	t.Helper()
	from := 0
	for _, to := range append(at, len(b)) {
		if _, err := io.WriteString(w, b[from:to]); err != nil {
			t.Fatal(err)
		}
		from = to
		time.Sleep(20 * time.Millisecond)
	}
}

// TestOnOpenWrapsDataHandler: an OnOpen handler finds the connection's
// data handler set and can wrap it to take the bytes before the HTTP
// request (here a line, in two reads, the second holding the start of
// the request); the request after them is served. Without the change
// the handler was set after OnOpen, replacing the wrapper: the line
// reached the HTTP parser.
func TestOnOpenWrapsDataHandler(t *testing.T) {
	e := NewEngine(Config{
		Network: "tcp",
		Addrs:   []string{"127.0.0.1:0"},
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte("ok")) }),
	})
	lines := make(chan string, 10)
	e.OnOpen(takePreface(lines))
	if err := e.Start(); err != nil {
		t.Fatal(err)
	}
	defer e.Stop()
	for i := 0; i < 3; i++ {
		c, err := net.Dial("tcp", e.Addrs[0])
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(10 * time.Second))
		const req = "GET / HTTP/1.1\r\nHost: x\r\n\r\n"
		writeSlowly(t, c, "PREFACE 42\n"+req, 4, 13)
		r := bufio.NewReader(c)
		res, err := http.ReadResponse(r, nil)
		if err != nil {
			t.Fatalf("connection %d: %v", i, err)
		}
		body, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != http.StatusOK || string(body) != "ok" {
			t.Fatalf("connection %d: %s %q", i, res.Status, body)
		}
		if got := <-lines; got != "PREFACE 42" {
			t.Fatalf("connection %d: the wrapper took %q", i, got)
		}
		// The handler is nbhttp's again: a second request on the
		// connection is served as usual.
		if body := get(t, c, r); body != "ok" {
			t.Fatalf("connection %d, second request: %q", i, body)
		}
	}
}

// TestOnOpenWrapsTLSDataHandler: the same on a TLS listener, where the
// wrapper takes the bytes before the TLS handshake.
func TestOnOpenWrapsTLSDataHandler(t *testing.T) {
	cert := selfSigned(t)
	e := NewEngine(Config{
		Network:   "tcp",
		AddrsTLS:  []string{"127.0.0.1:0"},
		TLSConfig: &tls.Config{Certificates: []tls.Certificate{cert}},
		Handler:   http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte("ok")) }),
	})
	lines := make(chan string, 10)
	e.OnOpen(takePreface(lines))
	if err := e.Start(); err != nil {
		t.Fatal(err)
	}
	defer e.Stop()
	raw, err := net.Dial("tcp", e.AddrsTLS[0])
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	writeSlowly(t, raw, "PREFACE 7\n", 3)
	c := stdtls.Client(raw, &stdtls.Config{InsecureSkipVerify: true})
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	if body := get(t, c, bufio.NewReader(c)); body != "ok" {
		t.Fatalf("over TLS: %q", body)
	}
	if got := <-lines; got != "PREFACE 7" {
		t.Fatalf("the wrapper took %q", got)
	}
}

// selfSigned returns a certificate for 127.0.0.1.
func selfSigned(t *testing.T) tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: "127.0.0.1"},
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1)},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := tls.X509KeyPair(
		pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}),
	)
	if err != nil {
		t.Fatal(err)
	}
	return cert
}
