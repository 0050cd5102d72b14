package relay

import (
	"runtime"
	"time"
)

// Config configures the protocol engine. The zero value works: every zero
// field takes the default named in its comment (Normalize fills them in).
// Where a limit can be switched off, a negative value means "no limit".
type Config struct {
	// URL is this relay's public WebSocket URL (wss://relay.example.com).
	// NIP-42 AUTH events and NIP-62 requests to vanish are checked against
	// it; it is never taken from request headers. Default "" (AUTH then
	// accepts any relay tag that names a loopback address).
	URL string `toml:"url"`

	// MaxMessageBytes is the largest WebSocket message accepted. Larger
	// frames close the connection with 1009. Default 131072 bytes.
	MaxMessageBytes int `toml:"max_message_bytes"`
	// MaxEventBytes is the largest event JSON accepted. Default 65536 bytes.
	MaxEventBytes int `toml:"max_event_bytes"`
	// MaxSubscriptions is the number of open subscriptions per connection.
	// Default 200.
	MaxSubscriptions int `toml:"max_subscriptions"`
	// MaxFilters is the number of filters per REQ or COUNT. Default 200.
	MaxFilters int `toml:"max_filters"`
	// MaxFilterValues is the number of elements in any one filter array
	// (ids, authors, kinds, #tag). Default 1000.
	MaxFilterValues int `toml:"max_filter_values"`
	// MaxLimit caps a filter's limit; larger limits (and a missing limit)
	// are clamped to it. Default 500.
	MaxLimit int `toml:"max_limit"`
	// MaxSubIDLength is the longest subscription id in bytes. Default 64.
	MaxSubIDLength int `toml:"max_subid_length"`
	// MaxTags is the number of tags in an event. Default 2000.
	MaxTags int `toml:"max_tags"`
	// MaxContentBytes is the largest event content. Default: bounded only by
	// MaxEventBytes.
	MaxContentBytes int `toml:"max_content_bytes"`
	// CreatedAtFuture is how far in the future created_at may be.
	// Default 15m. Negative: no bound.
	CreatedAtFuture time.Duration `toml:"created_at_future"`
	// CreatedAtPast is how far in the past created_at may be. Default 0:
	// no bound.
	CreatedAtPast time.Duration `toml:"created_at_past"`

	// OutQueueFrames caps the frames waiting to be written to one
	// connection. Default 4096 frames.
	OutQueueFrames int `toml:"out_queue_frames"`
	// OutQueueBytes caps the bytes waiting to be written to one connection
	// (live events; control frames always pass). Default 1 MiB.
	OutQueueBytes int `toml:"out_queue_bytes"`
	// QueryBytesPerConn caps stored-query output waiting to be written to
	// one connection; a query producing more pauses until the client reads.
	// Default 32 MiB.
	QueryBytesPerConn int64 `toml:"query_bytes_per_conn"`
	// QueryBytesTotal is the same cap relay-wide. Default 512 MiB.
	QueryBytesTotal int64 `toml:"query_bytes_total"`
	// QuerySlice is how long one stored query runs before yielding to
	// others. Default 10ms.
	QuerySlice time.Duration `toml:"query_slice"`
	// QueryWorkers is the number of goroutines running stored queries.
	// Default: the number of CPUs.
	QueryWorkers int `toml:"query_workers"`
	// DrainTimeout closes a connection whose out-queue has made no progress
	// for this long. Default 30s.
	DrainTimeout time.Duration `toml:"drain_timeout"`
	// IdleTimeout closes a connection that has sent nothing (not even a
	// pong) for this long. Pings are sent after half of it. Default 300s.
	IdleTimeout time.Duration `toml:"idle_timeout"`

	// VerifyWorkers is the number of signature-verification goroutines.
	// Default: the number of CPUs.
	VerifyWorkers int `toml:"verify_workers"`
	// VerifyQueue is the number of events waiting for verification,
	// relay-wide; beyond it EVENTs are refused with "rate-limited:".
	// Default 4096.
	VerifyQueue int `toml:"verify_queue"`
	// MaxPendingEvents is the number of EVENTs one connection may have
	// awaiting their OK; beyond it they are refused with "rate-limited:".
	// Default 1024.
	MaxPendingEvents int `toml:"max_pending_events"`
	// FanoutQueue is the number of committed events waiting to be fanned
	// out. Default 65536.
	FanoutQueue int `toml:"fanout_queue"`
}

// Normalize returns c with defaults filled in for zero fields.
func (c Config) Normalize() Config {
	def := func(v *int, d int) {
		if *v == 0 {
			*v = d
		}
	}
	def(&c.MaxMessageBytes, 131072)
	def(&c.MaxEventBytes, 65536)
	def(&c.MaxSubscriptions, 200)
	def(&c.MaxFilters, 200)
	def(&c.MaxFilterValues, 1000)
	def(&c.MaxLimit, 500)
	def(&c.MaxSubIDLength, 64)
	def(&c.MaxTags, 2000)
	def(&c.OutQueueFrames, 4096)
	def(&c.OutQueueBytes, 1<<20)
	def(&c.QueryWorkers, runtime.NumCPU())
	def(&c.VerifyWorkers, runtime.NumCPU())
	def(&c.VerifyQueue, 4096)
	def(&c.MaxPendingEvents, 1024)
	def(&c.FanoutQueue, 65536)
	if c.QueryBytesPerConn == 0 {
		c.QueryBytesPerConn = 32 << 20
	}
	if c.QueryBytesTotal == 0 {
		c.QueryBytesTotal = 512 << 20
	}
	if c.CreatedAtFuture == 0 {
		c.CreatedAtFuture = 15 * time.Minute
	}
	if c.QuerySlice <= 0 {
		c.QuerySlice = 10 * time.Millisecond
	}
	if c.DrainTimeout <= 0 {
		c.DrainTimeout = 30 * time.Second
	}
	if c.IdleTimeout == 0 {
		c.IdleTimeout = 300 * time.Second
	}
	return c
}
