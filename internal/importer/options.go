package importer

import "github.com/petrel-relay/petrel/internal/nostr"

// Defaults of Options.
const (
	// DefaultBatch is the default Options.Batch: events per store.Save.
	DefaultBatch = 2048
	// DefaultMaxLine is the default Options.MaxLine: 16 MiB.
	DefaultMaxLine = 16 << 20
)

// Chunks of input handed to a worker at once.
const (
	chunkLines = 256     // lines
	chunkBytes = 1 << 20 // or this many bytes
)

// Options configures Run. The zero value verifies signatures with
// nostr.DefaultVerifier on one worker per CPU, for a relay whose URL is
// not configured.
type Options struct {
	// NoVerify skips the signature check (ids are always checked).
	NoVerify bool
	// Verifier checks signatures. Default nostr.DefaultVerifier().
	Verifier nostr.Verifier
	// Workers parse and verify lines. Default GOMAXPROCS.
	Workers int
	// Batch is the number of events per store.Save. Default DefaultBatch
	// (2048).
	Batch int
	// MaxLine is the longest line in bytes, without its line ending;
	// longer lines are counted invalid and skipped. Default DefaultMaxLine
	// (16 MiB).
	MaxLine int
	// MaxErrors is how many refused lines are listed in Result.Errors.
	// Default 0 lists none.
	MaxErrors int
	// OwnURL is this relay's URL (relay.url, from nostr.ParseOwnURL):
	// requests to vanish (kind 62) are saved only when addressed to it
	// (nostr.VanishAddressedTo), as the relay accepts them. The zero
	// value, as in the relay, stands for a relay whose URL is not
	// configured: loopback URLs name it.
	OwnURL nostr.OwnURL
	// Now is the unix time against which NIP-40 expirations are checked.
	// Default time.Now().
	Now int64
}
