package bench

import (
	"context"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/petrel-relay/petrel/internal/nostr"
)

// Vocabulary is the fixed word list event content is drawn from. Every word
// is lowercase ASCII letters, so a NIP-50 search for any one of them has
// matches in a filled store (each word is in roughly one event in eight).
var Vocabulary = []string{
	"about", "above", "across", "after", "again", "against", "air", "almost",
	"alone", "along", "always", "among", "animal", "answer", "apple", "april",
	"area", "around", "autumn", "away", "baker", "banana", "basket", "beach",
	"bear", "beauty", "before", "begin", "behind", "believe", "below", "berry",
	"better", "between", "bird", "bitcoin", "black", "blue", "boat", "body",
	"book", "bottle", "bread", "breeze", "bridge", "bright", "brother", "brown",
	"build", "butter", "cabin", "cable", "camera", "candle", "canyon", "carbon",
	"carpet", "castle", "cedar", "center", "chair", "change", "cherry", "circle",
	"city", "clean", "clear", "climb", "clock", "cloud", "coast", "coffee",
	"color", "common", "copper", "corner", "cotton", "country", "course", "cover",
	"craft", "cream", "crystal", "dance", "dawn", "desert", "design", "diamond",
	"dinner", "distant", "doctor", "dragon", "dream", "drift", "early", "earth",
	"east", "echo", "eight", "electric", "ember", "empty", "engine", "evening",
	"every", "fabric", "falcon", "family", "farm", "feather", "field", "finger",
	"fire", "flower", "forest", "fortune", "fountain", "fresh", "friend", "frost",
	"garden", "gentle", "giant", "glass", "golden", "granite", "grass", "green",
	"guitar", "harbor", "harvest", "hazel", "heart", "heavy", "hidden", "hollow",
	"honey", "horizon", "house", "island", "ivory", "jacket", "jasmine", "journey",
	"jungle", "kettle", "kitchen", "ladder", "lantern", "laser", "lemon", "letter",
	"light", "linen", "little", "lizard", "lunar", "magnet", "maple", "marble",
	"market", "meadow", "melody", "metal", "middle", "midnight", "mirror", "morning",
	"mountain", "music", "narrow", "nature", "needle", "network", "night", "noble",
	"north", "ocean", "olive", "orange", "orbit", "paper", "pebble", "pepper",
	"petrel", "piano", "pillow", "planet", "pocket", "poem", "potato", "prairie",
	"purple", "quiet", "rabbit", "rain", "raven", "relay", "ribbon", "river",
	"rocket", "saddle", "salmon", "salt", "sand", "shadow", "silver", "simple",
	"sister", "sky", "slow", "smoke", "snow", "social", "soft", "south",
	"spark", "spring", "square", "stone", "storm", "stream", "street", "summer",
	"sunset", "swift", "table", "thunder", "tiger", "timber", "tower", "travel",
	"tulip", "tunnel", "valley", "velvet", "violet", "voyage", "wander", "water",
	"whisper", "winter", "wonder", "yellow", "zephyr", "zero", "window", "willow",
}

// Hashtags are the values of the events' "t" tags.
var Hashtags = []string{
	"nostr", "bitcoin", "photography", "music", "art", "food", "travel",
	"science", "books", "coffee", "garden", "weather", "sports", "news",
	"history", "petrel",
}

// GenConfig configures a Generator. The same GenConfig always gives the
// same events, byte for byte.
type GenConfig struct {
	// Seed selects the authors and the events. Default 0 is a valid seed.
	Seed uint64
	// Authors is the number of signing keys; event i is signed by author
	// i mod Authors. Default 100.
	Authors int
	// Stream separates event sets made from one seed (for example "fill"
	// and "fanout" events in one run): the authors are the same, the
	// events differ. Default "".
	Stream string
	// Start is the created_at of event 0 (unix seconds). It must be set:
	// relays refuse events too far from their clock, so callers derive it
	// from the current time (see StartFor) or pin it for reproducibility.
	Start int64
	// PerSecond is how many consecutive events share one created_at
	// second: event i has created_at Start + i/PerSecond. Default 100.
	PerSecond int
	// Text is how content is written: TextVocabulary (default) draws
	// every word evenly from Vocabulary's 248; TextNatural draws them
	// Zipf-distributed from NaturalWords words, Vocabulary's first, so
	// that the search index sees a long tail of rare words as it does
	// with real notes (it then writes about twice the keys an event:
	// docs/BENCHMARKS.md, issue 19).
	Text string
}

// Content styles (GenConfig.Text).
const (
	TextVocabulary = "vocabulary"
	TextNatural    = "natural"
)

// NaturalWords is the size of TextNatural's vocabulary, and naturalS the
// Zipf exponent of its word frequencies (about that of English text).
const (
	NaturalWords = 200_000
	naturalS     = 1.1
)

// naturalWord returns the word of rank r (0: the most frequent): a word
// of Vocabulary for the first ranks, then lowercase letters spelling r
// after an "x" (so no two ranks share a word, and the analyzer keeps
// every one).
func naturalWord(dst []byte, r uint64) []byte {
	if r < uint64(len(Vocabulary)) {
		return append(dst, Vocabulary[r]...)
	}
	dst = append(dst, 'x')
	var buf [16]byte
	n := len(buf)
	for {
		n--
		buf[n] = byte('a' + r%26)
		if r /= 26; r == 0 {
			break
		}
	}
	return append(dst, buf[n:]...)
}

func (c GenConfig) normalize() GenConfig {
	if c.Text == "" {
		c.Text = TextVocabulary
	}
	if c.Authors <= 0 {
		c.Authors = 100
	}
	if c.PerSecond <= 0 {
		c.PerSecond = 100
	}
	return c
}

// StartFor returns the Start that makes the last of n events, at perSecond
// events per second (0: the default 100), carry created_at now.
func StartFor(now int64, n, perSecond int) int64 {
	if perSecond <= 0 {
		perSecond = 100
	}
	if n <= 0 {
		return now
	}
	return now - int64((n-1)/perSecond)
}

// Generator makes deterministic signed kind-1 events. It is safe for
// concurrent use after NewGenerator returns.
type Generator struct {
	cfg    GenConfig
	keys   []nostr.SecretKey
	pubs   []nostr.PubKey
	stream uint64
}

// NewGenerator derives the authors' keys (nostr.SecretKeyFromSeed of
// "petrel-bench/<seed>/author/<k>") and returns a generator.
func NewGenerator(cfg GenConfig) *Generator {
	cfg = cfg.normalize()
	g := &Generator{cfg: cfg, keys: make([]nostr.SecretKey, cfg.Authors), pubs: make([]nostr.PubKey, cfg.Authors)}
	for k := range g.keys {
		g.keys[k] = AuthorKey(cfg.Seed, k)
		g.pubs[k] = g.keys[k].PubKey()
	}
	h := fnv.New64a()
	h.Write([]byte(cfg.Stream))
	g.stream = h.Sum64()
	return g
}

// AuthorKey returns the secret key of author k for seed.
func AuthorKey(seed uint64, k int) nostr.SecretKey {
	return nostr.SecretKeyFromSeed([]byte("petrel-bench/" + strconv.FormatUint(seed, 10) + "/author/" + strconv.Itoa(k)))
}

// Config returns the generator's configuration with defaults filled in.
func (g *Generator) Config() GenConfig { return g.cfg }

// Authors returns the authors' public keys, indexed by author number. The
// slice is shared: callers must not modify it.
func (g *Generator) Authors() []nostr.PubKey { return g.pubs }

// AuthorOf returns the author number of event i.
func (g *Generator) AuthorOf(i int) int { return i % g.cfg.Authors }

// CreatedAt returns the created_at of event i.
func (g *Generator) CreatedAt(i int) int64 { return g.cfg.Start + int64(i/g.cfg.PerSecond) }

// Unsigned returns event i without id, pubkey or signature: kind 1, a "p"
// tag naming another author, an "e" tag with a pseudo-random id, a "t" tag
// from Hashtags, and 100 to 300 bytes of content from Vocabulary (or, with
// TextNatural, from NaturalWords words).
func (g *Generator) Unsigned(i int) *nostr.Event {
	rng := rand.New(rand.NewPCG(g.cfg.Seed, g.stream^(uint64(i)*0x9e3779b97f4a7c15)))
	a := g.AuthorOf(i)
	p := (a + 1 + rng.IntN(max(g.cfg.Authors-1, 1))) % g.cfg.Authors
	var e [32]byte
	for j := 0; j < 4; j++ {
		binary.LittleEndian.PutUint64(e[8*j:], rng.Uint64())
	}
	target := 100 + rng.IntN(201)
	content := make([]byte, 0, target+16)
	var zipf *rand.Zipf
	if g.cfg.Text == TextNatural {
		zipf = rand.NewZipf(rng, naturalS, 1, NaturalWords-1)
	}
	for len(content) < target {
		if len(content) > 0 {
			content = append(content, ' ')
		}
		if zipf != nil {
			content = naturalWord(content, zipf.Uint64())
		} else {
			content = append(content, Vocabulary[rng.IntN(len(Vocabulary))]...)
		}
	}
	if len(content) > 300 {
		cut := 300
		for cut > 0 && content[cut] != ' ' {
			cut--
		}
		content = content[:cut]
	}
	return &nostr.Event{
		CreatedAt: g.CreatedAt(i),
		Kind:      nostr.KindTextNote,
		Tags: nostr.Tags{
			{"p", g.pubs[p].Hex()},
			{"e", hex.EncodeToString(e[:])},
			{"t", Hashtags[rng.IntN(len(Hashtags))]},
		},
		Content: string(content),
	}
}

// Event returns event i signed by its author. It gives the same event as
// nostr.SignEvent, without re-deriving the author's public key each time.
func (g *Generator) Event(i int) *nostr.Event {
	ev := g.Unsigned(i)
	a := g.AuthorOf(i)
	ev.PubKey = g.pubs[a]
	ev.ID = nostr.ComputeID(ev)
	ev.Sig = g.keys[a].Sign((*[32]byte)(&ev.ID))
	ev.Raw = nostr.Serialize(ev)
	return ev
}

// EventSet is a list of signed events with their EVENT frames and an index
// by id. It is read-only once built (DropParsed aside) and safe for
// concurrent reads.
type EventSet struct {
	// Events are the parsed events; nil after DropParsed.
	Events []*nostr.Event
	// Frames[i] is ["EVENT",<Events[i].Raw>], ready to send.
	Frames [][]byte
	index  map[nostr.ID]int32
}

// Index returns the position of the event with id in the set.
func (s *EventSet) Index(id nostr.ID) (int, bool) {
	i, ok := s.index[id]
	return int(i), ok
}

// Len returns the number of events.
func (s *EventSet) Len() int { return len(s.Frames) }

// DropParsed lets the parsed events go, keeping the frames and the index,
// which is all a publishing scenario sends and matches OKs with: about
// two thirds of the set's memory. Call it before anything reads the set
// concurrently.
func (s *EventSet) DropParsed() { s.Events = nil }

// Generate signs events first..first+n-1 on workers goroutines (0: one per
// CPU) and returns them as an EventSet. progress, if not nil, is called
// with the number of events signed since its last call. It stops early
// with ctx's error.
func (g *Generator) Generate(ctx context.Context, first, n, workers int, progress func(int)) (*EventSet, error) {
	if n < 0 || first < 0 {
		return nil, fmt.Errorf("bench: generate %d events from %d", n, first)
	}
	if workers <= 0 {
		workers = runtime.NumCPU()
	}
	set := &EventSet{Events: make([]*nostr.Event, n), Frames: make([][]byte, n)}
	var next atomic.Int64
	var wg sync.WaitGroup
	const chunk = 256
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				lo := int(next.Add(chunk)) - chunk
				if lo >= n {
					return
				}
				hi := min(lo+chunk, n)
				for i := lo; i < hi; i++ {
					ev := g.Event(first + i)
					set.Events[i] = ev
					f := make([]byte, 0, len(ev.Raw)+11)
					f = append(f, `["EVENT",`...)
					f = append(f, ev.Raw...)
					set.Frames[i] = append(f, ']')
				}
				if progress != nil {
					progress(hi - lo)
				}
			}
		}()
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	set.index = make(map[nostr.ID]int32, n)
	for i, ev := range set.Events {
		set.index[ev.ID] = int32(i)
	}
	return set, nil
}
