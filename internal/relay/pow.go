package relay

import (
	"math/bits"
	"strconv"
	"strings"

	"github.com/petrel-relay/petrel/internal/nostr"
)

// difficulty returns the NIP-13 proof-of-work difficulty of an event id:
// its number of leading zero bits.
func difficulty(id *nostr.ID) int {
	for i, b := range id {
		if b != 0 {
			return i*8 + bits.LeadingZeros8(b)
		}
	}
	return 256
}

// checkPoW refuses ev with "pow:" if its id has fewer than min leading zero
// bits, or if its "nonce" tag commits to a target difficulty below min
// (NIP-13: a lucky hash does not make up for a low committed target). A
// nonce tag without a target, or with one that is not a number, is not
// held against the event. It allocates only to refuse.
func checkPoW(ev *nostr.Event, min int) *nostr.Rejection {
	if d := difficulty(&ev.ID); d < min {
		return nostr.Reject(nostr.PrefixPoW, "difficulty "+strconv.Itoa(d)+" is less than "+strconv.Itoa(min))
	}
	for _, t := range ev.Tags {
		if len(t) >= 3 && t[0] == "nonce" {
			target, err := strconv.Atoi(strings.TrimSpace(t[2]))
			if err == nil && target < min {
				return nostr.Reject(nostr.PrefixPoW, "committed target difficulty "+strconv.Itoa(target)+" is less than "+strconv.Itoa(min))
			}
			break
		}
	}
	return nil
}
