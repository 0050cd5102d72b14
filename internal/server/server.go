package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lesismal/nbio/logging"
	"github.com/lesismal/nbio/nbhttp"
	"github.com/lesismal/nbio/nbhttp/websocket"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/petrel-relay/petrel/internal/deflate"
	"github.com/petrel-relay/petrel/internal/nostr"
	"github.com/petrel-relay/petrel/internal/relay"
)

// Options are the server's collaborators.
type Options struct {
	Relay   *relay.Relay // required
	Version string
	Logger  *slog.Logger
	// Registry receives the relay's metrics; default a new registry with
	// the Go and process collectors.
	Registry *prometheus.Registry
	// Listener, from Bind on the same Config, is served instead of a
	// listener made by Start: petrel serve binds before it opens the
	// store, so that an address it cannot have fails at once and leaves
	// no new store behind. The server closes it.
	Listener net.Listener
}

// Bind listens on cfg's address as Start would, for Options.Listener.
// Connections made before Start wait in the kernel's backlog.
func Bind(cfg Config) (net.Listener, error) {
	addr := cfg.Normalize().Listen
	ln, err := bindTCP("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", addr, err)
	}
	return ln, nil
}

func bindTCP(network, addr string) (net.Listener, error) {
	lc := net.ListenConfig{KeepAlive: -1}
	return lc.Listen(context.Background(), network, addr)
}

// Server is a running network edge.
type Server struct {
	cfg      Config
	version  string
	relay    *relay.Relay
	log      *slog.Logger
	engine   *nbhttp.Engine
	upgrader *websocket.Upgrader
	slots    *slots
	registry *prometheus.Registry
	metrics  http.Handler
	nip86    http.Handler // the NIP-86 management API
	admins   int          // number of NIP-86 admins

	lnMu      sync.Mutex
	bound     net.Listener // Options.Listener, until Start takes it
	lns       []net.Listener
	addr      net.Addr
	debugAddr net.Addr // the pprof_listen listener's

	stopOnce sync.Once
	pprof    *http.Server

	proxies       []netip.Prefix // Config.TrustedProxies
	proxyNoClient atomic.Int64   // upgrades from a trusted proxy without a usable client address
	reloads       reloadCounts   // configuration reloads (NoteReload)
	proxyStats    proxyStats     // Config.ProxyProtocol

	handlers   *handlerPool  // runs nbio's message handlers (handlers.go)
	series     *series       // the dashboard's samples (dashboard.go)
	sampleStop chan struct{} // closed by Shutdown: stops the sampler (and connShare)
	connShare  *connShare    // the per-address cap across nodes; nil: one node, or no cap
}

// New builds a server; Start begins listening.
func New(cfg Config, opts Options) (*Server, error) {
	if opts.Relay == nil {
		return nil, errors.New("server: a relay is required")
	}
	cfg = cfg.Normalize()
	s := &Server{
		cfg:      cfg,
		version:  opts.Version,
		relay:    opts.Relay,
		log:      opts.Logger,
		registry: opts.Registry,
		bound:    opts.Listener,
	}
	if s.log == nil {
		s.log = slog.Default()
	}
	s.handlers = defaultHandlerPool(s.log)
	if s.version == "" {
		s.version = "dev"
	}
	parsed, err := cfg.parse()
	if err != nil {
		return nil, err
	}
	s.initNIP86(parsed.admins)
	s.proxies = parsed.proxies
	s.slots = newSlots(cfg.MaxConnections, cfg.MaxConnectionsPerIP, cfg.HTTPReserve)
	if cs, ok := s.relay.Bus().(relay.ConnSharer); ok && cfg.MaxConnectionsPerIP > 0 {
		s.connShare = newConnShare(cs, s.slots, cfg.MaxConnectionsPerIP)
	}
	s.initMetrics()
	st := s.statsDoc()
	s.series = newSeries(&st)
	s.sampleStop = make(chan struct{})
	logging.SetLogger(nbioLogger{s.log})

	rcfg := s.relay.Config()
	mux := http.NewServeMux()
	mux.HandleFunc("/", s.handleRoot)
	mux.HandleFunc("/stats", s.handleStats)
	mux.Handle("/metrics", s.metrics)
	mux.HandleFunc("/stats/series", s.handleSeries)
	mux.HandleFunc("/dashboard/", s.handleDashboardAsset)

	pollers := cfg.Pollers
	if pollers <= 0 {
		pollers = 0 // nbio default: NumCPU
	}
	s.engine = nbhttp.NewEngine(nbhttp.Config{
		Name:                         "petrel",
		Network:                      "tcp",
		Addrs:                        []string{cfg.Listen},
		Listen:                       s.listen,
		MaxLoad:                      1 << 30,
		NPoller:                      pollers,
		KeepaliveTime:                cfg.HeaderTimeout,
		ReadLimit:                    maxHTTPRequest,
		MaxHTTPBodySize:              maxHTTPRequest,
		MaxWebsocketFramePayloadSize: rcfg.MaxMessageBytes,
		ReleaseWebsocketPayload:      true,
		ServerExecutor:               s.handlers.Go,
		Handler:                      mux,
	})
	s.engine.CheckUtf8 = func([]byte) bool { return true } // the relay closes with 1007 itself
	s.engine.OnOpen(s.onOpen)
	s.engine.OnClose(s.onClose)
	s.engine.OnWrittenSize(s.onWritten)
	// The upgrader uses the server's engine (its buffers): NewUpgrader
	// would make nbio's DefaultEngine too, a second engine with a task
	// pool that nothing here uses.
	s.upgrader = websocket.NewUpgraderWithEngine(s.engine)
	s.upgrader.KeepaliveTime = 0 // idle handling is the relay's global sweep
	s.upgrader.MessageLengthLimit = rcfg.MaxMessageBytes
	s.upgrader.CheckOrigin = func(*http.Request) bool { return true }
	s.upgrader.EnableCompression(false)
	if *cfg.Compression {
		codec, err := deflate.New(cfg.CompressionLevel)
		if err != nil {
			return nil, fmt.Errorf("server: compression_level: %w", err)
		}
		s.relay.SetCompression(relay.Compression{Codec: codec, MinBytes: cfg.CompressionMinBytes, CacheBytes: cfg.CompressionCacheBytes})
		s.upgrader.EnableCompression(true)
	}
	s.upgrader.OnMessage(s.onMessage)
	s.upgrader.OnClose(s.onWSClose)
	s.upgrader.SetPongHandler(func(c *websocket.Conn, _ string) {
		if t, ok := c.Session().(*transport); ok {
			t.sess.Touch()
		}
	})
	s.upgrader.SetPingHandler(func(c *websocket.Conn, data string) {
		if t, ok := c.Session().(*transport); ok {
			t.sess.Touch()
			t.sess.SendPong([]byte(data))
			return
		}
		_ = c.WriteMessage(websocket.PongMessage, []byte(data))
	})

	return s, nil
}

// Start listens and serves until Shutdown.
func (s *Server) Start() error {
	if err := s.engine.Start(); err != nil {
		return fmt.Errorf("listen on %s: %w", s.cfg.Listen, err)
	}
	st := s.statsDoc()
	s.series.add(time.Now(), &st)
	go s.sample(s.sampleStop)
	if s.connShare != nil {
		go s.connShare.run(s.sampleStop)
	}
	if s.cfg.PprofListen != "" {
		ln, err := net.Listen("tcp", s.cfg.PprofListen)
		if err != nil {
			return fmt.Errorf("pprof listen on %s: %w", s.cfg.PprofListen, err)
		}
		mux := http.NewServeMux()
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
		mux.HandleFunc("/debug/petrel/oktrace/", s.handleOKTrace)
		s.pprof = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
		s.lnMu.Lock()
		s.debugAddr = ln.Addr()
		s.lnMu.Unlock()
		go s.pprof.Serve(ln)
		s.log.Info("pprof listening", "addr", ln.Addr().String())
		if a, ok := ln.Addr().(*net.TCPAddr); ok && !a.IP.IsLoopback() {
			// It has no authentication: profiles, goroutine stacks, the
			// command line and the OK trace to anyone who can reach it.
			s.log.Warn("server.pprof_listen is not on loopback: anyone who can reach it can read the relay's internals", "addr", ln.Addr().String())
		}
	}
	return nil
}

// DebugAddr returns the address of the debug listener
// (server.pprof_listen), nil when there is none.
func (s *Server) DebugAddr() net.Addr {
	s.lnMu.Lock()
	defer s.lnMu.Unlock()
	return s.debugAddr
}

// Addr returns the address the server listens on (useful with port 0).
func (s *Server) Addr() net.Addr {
	s.lnMu.Lock()
	defer s.lnMu.Unlock()
	return s.addr
}

// URL returns the ws:// URL of the server.
func (s *Server) URL() string { return "ws://" + s.Addr().String() }

// Shutdown stops accepting connections, lets the relay commit and answer
// what it has queued and drain out-queues (bounded by ShutdownTimeout),
// closes every connection with 1001 and stops the engine.
func (s *Server) Shutdown(ctx context.Context) error {
	var err error
	s.stopOnce.Do(func() {
		close(s.sampleStop)
		if s.pprof != nil {
			s.pprof.Close()
		}
		// Stop accepting; nbio goes on serving the open connections.
		s.lnMu.Lock()
		for _, ln := range s.lns {
			ln.Close()
		}
		s.lnMu.Unlock()
		dctx, cancel := context.WithTimeout(ctx, s.cfg.ShutdownTimeout)
		s.relay.Shutdown(dctx)
		cancel()
		// Give close frames a moment to leave, then tear down.
		deadline := time.Now().Add(500 * time.Millisecond)
		for s.slots.active() > 0 && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
		sctx, cancel2 := context.WithTimeout(ctx, 2*time.Second)
		defer cancel2()
		err = s.engine.Shutdown(sctx)
		if errors.Is(err, context.DeadlineExceeded) {
			err = nil
		}
		s.handlers.Stop()
	})
	return err
}

// listen opens nbio's listener and keeps it, for Addr and for Shutdown to
// stop accepting.
//
// TCP keepalive is off on the connections it accepts: the relay finds a
// dead peer with its own WebSocket pings (relay.idle_timeout), and Go's
// default keepalive (a probe every 15 s once a connection is idle) is a
// kernel timer and two packets per connection every 15 s. At a million
// idle connections on one box (two million sockets, both ends) those
// are about 130,000 probes a second: the kernel dropped about 18 million of them from its backlog
// and aborted 391,694 of the relay's sockets, whose subscribers then
// missed their events (docs/BENCHMARKS.md, issue 14).
func (s *Server) listen(network, addr string) (net.Listener, error) {
	s.lnMu.Lock()
	ln := s.bound
	s.bound = nil
	s.lnMu.Unlock()
	if ln == nil {
		var err error
		if ln, err = bindTCP(network, addr); err != nil {
			return nil, err
		}
	}
	s.lnMu.Lock()
	s.lns = append(s.lns, ln)
	s.addr = ln.Addr()
	s.lnMu.Unlock()
	return ln, nil
}

// nbioLogger routes nbio's logs to slog, dropping its debug/info chatter.
type nbioLogger struct{ l *slog.Logger }

func (n nbioLogger) Debug(string, ...any) {}
func (n nbioLogger) Info(string, ...any)  {}
func (n nbioLogger) Warn(f string, v ...any) {
	n.l.Warn("nbio: " + fmt.Sprintf(f, v...))
}
func (n nbioLogger) Error(f string, v ...any) {
	n.l.Warn("nbio: " + fmt.Sprintf(f, v...))
}

// initNIP86 builds the NIP-86 management API over the relay: its write
// lists, its NIP-11 information (changes persisted by Relay.ChangeInfo)
// and its store (banevent deletes the stored copy). A ban of a pubkey or
// a block of an address also closes the connections it concerns.
func (s *Server) initNIP86(admins []nostr.PubKey) {
	s.admins = len(admins)
	rl := s.relay
	s.nip86 = NewNIP86Handler(NIP86Deps{
		Lists:      rl.Lists(),
		Admins:     admins,
		URL:        rl.Config().URL,
		ChangeInfo: rl.ChangeInfo,
		DeleteEvent: func(ctx context.Context, id nostr.ID) error {
			_, err := rl.Store().Delete(ctx, []nostr.ID{id})
			return err
		},
		Logger: s.log,
		OnChange: func(method string) {
			rl.PolicyChanged() // the other nodes of a cluster read it now
			switch method {
			// Every change of the banned pubkeys or the blocked
			// addresses: one that lifts something is made to the list
			// as persisted, which may carry a ban or block another
			// node has just made (policy.Lists).
			case "banpubkey", "unbanpubkey", "allowpubkey", "blockip", "unblockip":
				if n := rl.DisconnectBlocked(); n > 0 {
					s.log.Info("nip86: closed connections", "method", method, "count", n)
				}
			}
		},
	})
}
