package nip13

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding"
	"errors"
	"fmt"
	"hash"
	"math/bits"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/petrel-relay/petrel/internal/nostr"
)

// MaxDifficulty is the largest target Mine accepts: every added bit
// doubles the expected work, and 64 bits would take longer than anyone
// waits.
const MaxDifficulty = 64

// ErrTarget means a target outside 0..MaxDifficulty.
var ErrTarget = errors.New("nip13: target difficulty must be 0 to 64")

// Difficulty returns the number of leading zero bits of id.
func Difficulty(id nostr.ID) int {
	for i, b := range id {
		if b != 0 {
			return i*8 + bits.LeadingZeros8(b)
		}
	}
	return 256
}

// Committed returns the target difficulty an event's "nonce" tag commits
// to (its third element), and whether it has one that is a number.
func Committed(ev *nostr.Event) (int, bool) {
	for _, t := range ev.Tags {
		if len(t) >= 3 && t[0] == "nonce" {
			n, err := strconv.Atoi(t[2])
			return n, err == nil
		}
	}
	return 0, false
}

// Mine sets ev's "nonce" tag (replacing one it has, else adding it last)
// to ["nonce", "<n>", "<target>"] with the first n found that gives
// ev.ID at least target leading zero bits, and sets ev.ID. It does not
// sign: call nostr.SignEvent after (which recomputes the same id, since
// the pubkey must be set before Mine). workers goroutines search
// disjoint nonces (at least 1). It returns ctx's error if ctx ends
// first, leaving ev unchanged. ev.PubKey must already be the signer's.
func Mine(ctx context.Context, ev *nostr.Event, target, workers int) error {
	if target < 0 || target > MaxDifficulty {
		return fmt.Errorf("%w: %d", ErrTarget, target)
	}
	workers = max(workers, 1)
	tags := make(nostr.Tags, 0, len(ev.Tags)+1)
	at := -1
	for _, t := range ev.Tags {
		if len(t) > 0 && t[0] == "nonce" && at < 0 {
			at = len(tags)
		}
		tags = append(tags, t)
	}
	if at < 0 {
		at = len(tags)
		tags = append(tags, nil)
	}
	// The canonical form around the nonce digits: the hash of prefix is
	// computed once; each try hashes digits + suffix from that state.
	const marker = "\x00petrel-nonce\x00"
	tags[at] = nostr.Tag{"nonce", marker, strconv.Itoa(target)}
	probe := *ev
	probe.Tags = tags
	canon := nostr.AppendCanonical(nil, &probe)
	esc := nostr.AppendString(nil, marker)
	i := bytes.Index(canon, esc)
	if i < 0 {
		panic("BUG: nip13: marker not in the canonical form")
	}
	prefix := canon[:i+1] // through the opening quote
	suffix := canon[i+len(esc)-1:]
	h := sha256.New()
	h.Write(prefix)
	state, err := h.(encoding.BinaryMarshaler).MarshalBinary()
	if err != nil {
		panic("BUG: nip13: sha256 state: " + err.Error())
	}
	var (
		found  atomic.Bool
		winner atomic.Uint64
		wg     sync.WaitGroup
	)
	for w := range workers {
		wg.Add(1)
		go func(start uint64) {
			defer wg.Done()
			mine(ctx, state, suffix, target, start, uint64(workers), &found, &winner)
		}(uint64(w))
	}
	wg.Wait()
	if !found.Load() {
		return ctx.Err()
	}
	n := winner.Load()
	tags[at] = nostr.Tag{"nonce", strconv.FormatUint(n, 10), strconv.Itoa(target)}
	ev.Tags = tags
	ev.ID = nostr.ComputeID(ev)
	if Difficulty(ev.ID) < target {
		panic("BUG: nip13: the mined id lost its difficulty")
	}
	return nil
}

func mine(ctx context.Context, state, suffix []byte, target int, n, step uint64, found *atomic.Bool, winner *atomic.Uint64) {
	h := sha256.New()
	um := h.(encoding.BinaryUnmarshaler)
	var digits [20]byte
	var sum [32]byte
	for tries := 0; ; tries++ {
		if tries&0xfff == 0 && (found.Load() || ctx.Err() != nil) {
			return
		}
		if err := um.UnmarshalBinary(state); err != nil {
			panic("BUG: nip13: sha256 state: " + err.Error())
		}
		h.Write(strconv.AppendUint(digits[:0], n, 10))
		h.Write(suffix)
		if leadingZeros(h, &sum) >= target {
			if found.CompareAndSwap(false, true) {
				winner.Store(n)
			}
			return
		}
		n += step
	}
}

func leadingZeros(h hash.Hash, sum *[32]byte) int {
	return Difficulty(nostr.ID(h.Sum(sum[:0])))
}
