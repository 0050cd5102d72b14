package cluster

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"

	"github.com/petrel-relay/petrel/internal/store"
)

// Sentinel errors.
var (
	// ErrOptions is returned by New for options it cannot run with.
	ErrOptions = errors.New("cluster: bad options")
	// ErrEnvelope is returned by the envelope decoder for a message that
	// is not a well-formed envelope.
	ErrEnvelope = errors.New("cluster: bad envelope")
	// ErrVersion is returned by the envelope decoder for an envelope of a
	// version this node does not read.
	ErrVersion = errors.New("cluster: unknown envelope version")
	// ErrStarted is returned by a second call to Start.
	ErrStarted = errors.New("cluster: already started")
)

// MaxNodeName is the longest node name, in bytes (it travels in every
// message's envelope).
const MaxNodeName = 64

// Options configure a Bridge. Feed and URL are required; every other zero
// value takes the default named in its comment.
type Options struct {
	// URL is the NATS server (or comma-separated servers) to connect to,
	// e.g. "nats://127.0.0.1:4222"; a user and password or a token may be
	// given in it ("nats://user:pass@host:4222"), and are never logged
	// (RedactURL). Anyone who can publish on Subject can hand events to
	// this node's subscribers: keep the bus private.
	URL string
	// Credentials is a NATS credentials file (a user JWT and its nkey
	// seed, as nsc writes them) for a server in operator (JWT) mode;
	// NKeySeed a file holding a user nkey seed for a server that lists
	// the user's public nkey. At most one of them.
	Credentials string
	NKeySeed    string
	// TLSCA is a PEM file of the certificate authorities that sign the
	// server's certificate (default: the system's); TLSCert and TLSKey a
	// client certificate and its key, for a server that verifies its
	// clients (both or neither). Any of them makes the connection TLS.
	TLSCA   string
	TLSCert string
	TLSKey  string
	// Node names this node in logs and in the envelopes it sends (1 to
	// MaxNodeName bytes). A random boot id is added to it, so a restarted
	// node, or two nodes given the same name, are never taken for one.
	Node string
	// Subject is the NATS subject of the bus (and Subject+".policy" of
	// its NIP-86 hints). Default "petrel.events".
	// Every node of one cluster must use the same subject.
	Subject string
	// Feed is the store of record, read to catch up after a loss.
	Feed store.Feed
	// Logger defaults to slog.Default().
	Logger *slog.Logger
	// MaxEventBytes is the largest event the relay accepts
	// (relay.max_event_bytes): a NATS server whose max_payload cannot
	// carry it with its envelope gets a warning in the log at connect
	// (such events reach the other nodes by their catch-up from the
	// store, late). 0: not checked.
	MaxEventBytes int

	// CatchUpMargin is subtracted from the point a catch-up starts from.
	// It must cover the longest time from a commit to the bus receiving
	// the event's publish (the accepting node's fan-out backlog), the
	// time a store transaction takes from stamping an event's accepted
	// time to its commit becoming visible, and the clock skew between
	// the nodes and the store. Default 5s.
	CatchUpMargin time.Duration
	// CatchUpBatch is the most records a catch-up reads and holds before
	// it hands them to the relay. Default 1024.
	CatchUpBatch int
	// PollInterval is how often the node catches up from the store while
	// a loss is going on (its own bus connection is down, or another
	// node went silent), so that those events still reach subscribers,
	// late, instead of waiting for the bus to heal. Default 2s.
	PollInterval time.Duration

	// HeartbeatInterval is how often the node publishes a heartbeat
	// carrying its bus sequence, so that a loss of its last messages is
	// seen even when it has nothing more to publish. Default 1s.
	HeartbeatInterval time.Duration
	// SilenceTimeout: a node not heard for this long (no event, no
	// heartbeat) while this node is connected and reading the bus (it has
	// heard back its own message sent this long after the other's last)
	// is taken as lost, and the store is polled for what it may have
	// committed until it is heard again or OriginExpiry passes. A node
	// that falls behind reading the bus takes nobody for silent. Default
	// 3s.
	SilenceTimeout time.Duration
	// OriginExpiry: a node not heard for this long is forgotten. Default
	// 10m.
	OriginExpiry time.Duration

	// DedupWindow is how long the ids this node fanned out are kept to
	// de-duplicate catch-ups (longer while a catch-up that needs them is
	// pending). It must exceed CatchUpMargin plus the longest time a loss
	// can go undetected (about PingInterval × (MaxPingsOut+1), and
	// PollInterval). Default 30s.
	DedupWindow time.Duration
	// DedupMax bounds the ids kept; past it the oldest go first, counted
	// in Stats.DedupOverflows (a catch-up may then deliver an event a
	// second time, never lose one). Default 262144 (about 25 MiB).
	DedupMax int

	// PublishQueue bounds the events waiting to be handed to NATS; a full
	// queue drops (counted in Stats.PublishDrops), and the other nodes
	// catch up from the store. Default 8192.
	PublishQueue int
	// ReconnectBuffer bounds the bytes NATS buffers while disconnected;
	// past it publishes fail (counted in Stats.PublishDrops). Default
	// 8 MiB; negative: no buffer (publishes fail while disconnected).
	ReconnectBuffer int
	// PendingMsgs and PendingBytes bound the messages received and not
	// yet handled; past them NATS drops messages (counted in
	// Stats.SlowConsumerDrops), which the sequence gap reveals. Defaults
	// 65536 and 64 MiB.
	PendingMsgs  int
	PendingBytes int

	// PingInterval and MaxPingsOut decide how soon a dead connection is
	// noticed: after about PingInterval × (MaxPingsOut+1). Defaults 2s
	// and 2.
	PingInterval time.Duration
	MaxPingsOut  int
	// ReconnectWait is the pause between reconnect attempts (with up to
	// 10% jitter); attempts never stop. Default 1s.
	ReconnectWait time.Duration
	// ConnectTimeout bounds one connection attempt. Default 2s.
	ConnectTimeout time.Duration
	// FlushTimeout bounds one write to the server; a server that takes
	// nothing for that long is reconnected to. Default 10s.
	FlushTimeout time.Duration
}

// Check reports, all together, what New would refuse in o besides a
// missing Feed (petrel serve --check): no URL, a node name too long or
// empty, and bad credentials or TLS files (each read).
func (o Options) Check() error {
	var errs []error
	if o.URL == "" {
		errs = append(errs, fmt.Errorf("%w: URL is required", ErrOptions))
	}
	if o.Node == "" || len(o.Node) > MaxNodeName {
		errs = append(errs, fmt.Errorf("%w: node name must be 1 to %d bytes, got %d", ErrOptions, MaxNodeName, len(o.Node)))
	}
	return errors.Join(append(errs, o.checkSecurity())...)
}

// normalize fills in defaults and checks the options.
func (o Options) normalize() (Options, error) {
	if o.Feed == nil {
		return o, fmt.Errorf("%w: Feed is required", ErrOptions)
	}
	if err := o.Check(); err != nil {
		return o, err
	}
	if o.Subject == "" {
		o.Subject = "petrel.events"
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	dur := func(d *time.Duration, def time.Duration) {
		if *d <= 0 {
			*d = def
		}
	}
	num := func(n *int, def int) {
		if *n <= 0 {
			*n = def
		}
	}
	dur(&o.CatchUpMargin, 5*time.Second)
	num(&o.CatchUpBatch, 1024)
	dur(&o.PollInterval, 2*time.Second)
	dur(&o.HeartbeatInterval, time.Second)
	dur(&o.SilenceTimeout, 3*time.Second)
	dur(&o.OriginExpiry, 10*time.Minute)
	dur(&o.DedupWindow, 30*time.Second)
	num(&o.DedupMax, 1<<18)
	num(&o.PublishQueue, 8192)
	if o.ReconnectBuffer == 0 {
		o.ReconnectBuffer = 8 << 20
	} else if o.ReconnectBuffer < 0 {
		o.ReconnectBuffer = -1
	}
	num(&o.PendingMsgs, 65536)
	num(&o.PendingBytes, 64<<20)
	dur(&o.PingInterval, 2*time.Second)
	num(&o.MaxPingsOut, 2)
	dur(&o.ReconnectWait, time.Second)
	dur(&o.ConnectTimeout, 2*time.Second)
	dur(&o.FlushTimeout, 10*time.Second)
	return o, nil
}

// checkSecurity reports what is wrong with the options' credentials and
// TLS files, reading each: a file that cannot be read, a credentials file
// without a user JWT and seed, a seed that is not a user's, a CA file
// without a certificate, a certificate without its key (or the reverse)
// or a pair that does not load, and Credentials with NKeySeed.
func (o Options) checkSecurity() error {
	var errs []error
	bad := func(field, file string, err error) {
		errs = append(errs, fmt.Errorf("%w: %s %s: %v", ErrOptions, field, file, err))
	}
	// read checks a file given in field with check, if one is given.
	read := func(field, file string, check func([]byte) error) {
		if file == "" {
			return
		}
		b, err := os.ReadFile(file)
		if err == nil {
			err = check(b)
		}
		if err != nil {
			bad(field, file, err)
		}
	}
	if o.Credentials != "" && o.NKeySeed != "" {
		errs = append(errs, fmt.Errorf("%w: give credentials or an nkey seed, not both", ErrOptions))
	}
	read("credentials", o.Credentials, func(b []byte) error {
		if _, err := nkeys.ParseDecoratedJWT(b); err != nil {
			return err
		}
		return userSeed(b, "no user nkey seed")
	})
	read("nkey seed", o.NKeySeed, func(b []byte) error { return userSeed(b, "not a user nkey seed") })
	read("TLS CA", o.TLSCA, func(b []byte) error {
		if !x509.NewCertPool().AppendCertsFromPEM(b) {
			return errors.New("no PEM certificate in it")
		}
		return nil
	})
	switch {
	case (o.TLSCert == "") != (o.TLSKey == ""):
		errs = append(errs, fmt.Errorf("%w: a TLS client certificate needs its key, and a key its certificate", ErrOptions))
	case o.TLSCert != "":
		if _, err := tls.LoadX509KeyPair(o.TLSCert, o.TLSKey); err != nil {
			bad("TLS client certificate", o.TLSCert, err)
		}
	}
	return errors.Join(errs...)
}

// userSeed checks that b holds a user nkey seed (alone or in a
// credentials file), saying what instead when it does not.
func userSeed(b []byte, what string) error {
	kp, err := nkeys.ParseDecoratedUserNKey(b)
	if err != nil {
		return fmt.Errorf("%s: %v", what, err)
	}
	kp.Wipe()
	return nil
}

// natsSecurity returns the NATS options for o's credentials and TLS
// (checked).
func (o Options) natsSecurity() ([]nats.Option, error) {
	var opts []nats.Option
	if o.Credentials != "" {
		opts = append(opts, nats.UserCredentials(o.Credentials))
	}
	if o.NKeySeed != "" {
		opt, err := nats.NkeyOptionFromSeed(o.NKeySeed)
		if err != nil {
			return nil, fmt.Errorf("%w: nkey seed %s: %v", ErrOptions, o.NKeySeed, err)
		}
		opts = append(opts, opt)
	}
	if o.TLSCA != "" {
		opts = append(opts, nats.RootCAs(o.TLSCA))
	}
	if o.TLSCert != "" {
		opts = append(opts, nats.ClientCert(o.TLSCert, o.TLSKey))
	}
	return opts, nil // RootCAs and ClientCert make the connection TLS
}

// RedactURL returns a NATS URL (or comma-separated URLs) fit for a log:
// a password is replaced by "xxxxx", and so is a user given without one
// (a token).
func RedactURL(s string) string {
	parts := strings.Split(s, ",")
	for i, p := range parts {
		u := splitUser(p)
		switch {
		case u.pass:
			parts[i] = u.scheme + u.user + ":xxxxx" + u.host
		case u.user != "":
			parts[i] = u.scheme + "xxxxx" + u.host
		default:
			parts[i] = u.host
		}
	}
	return strings.Join(parts, ",")
}

// urlUser is one NATS URL cut around its user information.
type urlUser struct {
	scheme string // "nats://", or "" when the URL has none
	user   string // "" without user information
	pass   bool   // a password follows the user (else a user alone is a token)
	host   string // the rest: "@host:port" after user information, else the URL
}

// splitUser cuts a NATS URL around its user information ("user:pass@"
// or "token@"; a password may hold '@').
func splitUser(p string) urlUser {
	p = strings.TrimSpace(p)
	at := strings.LastIndexByte(p, '@')
	if at < 0 {
		return urlUser{host: p}
	}
	u := urlUser{host: p[at:]}
	info := p[:at]
	if scheme, rest, ok := strings.Cut(info, "://"); ok {
		u.scheme, info = scheme+"://", rest
	}
	u.user, _, u.pass = strings.Cut(info, ":")
	return u
}

// Security says how o authenticates to the bus and whether it speaks
// TLS, without a secret, for the start-up log: "nkey, TLS with a client
// certificate", "password in the URL, no TLS"...
func (o Options) Security() string {
	auth := "no authentication"
	switch u := splitUser(strings.Split(o.URL, ",")[0]); {
	case o.Credentials != "":
		auth = "credentials file"
	case o.NKeySeed != "":
		auth = "nkey"
	case u.pass:
		auth = "password in the URL"
	case u.user != "":
		auth = "token in the URL"
	}
	tls := "no TLS"
	switch {
	case o.TLSCert != "":
		tls = "TLS with a client certificate"
	case o.TLSCA != "" || strings.Contains(o.URL, "tls://"):
		tls = "TLS"
	}
	return auth + ", " + tls
}
