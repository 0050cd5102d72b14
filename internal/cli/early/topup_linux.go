package early

import "github.com/petrel-relay/petrel/internal/startup"

// topUp finishes start-up's mapping of the heap (internal/startup), as
// cmd/petrel's main does first thing.
func topUp() { startup.TopUp() }
