package importer

// Counts are the per-outcome counts of an import. The JSON names are
// those `petrel import --json` prints.
type Counts struct {
	Lines           int64 `json:"lines"`                  // lines read
	Blank           int64 `json:"blank"`                  // empty or whitespace-only lines
	Messages        int64 `json:"skipped_messages"`       // envelopes other than EVENT
	Events          int64 `json:"events"`                 // lines holding a well-formed event
	Stored          int64 `json:"stored"`                 // saved
	Duplicate       int64 `json:"duplicate"`              // already stored
	Superseded      int64 `json:"superseded"`             // an older replaceable/addressable version
	Deleted         int64 `json:"deleted"`                // deleted earlier (NIP-09, NIP-62): refused
	Removed         int64 `json:"removed"`                // events removed by stored ones (older versions, deletion targets)
	Ephemeral       int64 `json:"ephemeral"`              // kinds 20000-29999: skipped
	Expired         int64 `json:"expired"`                // NIP-40 expiration passed: skipped
	VanishElsewhere int64 `json:"vanish_for_other_relay"` // kind 62 not addressed to this relay: skipped
	Invalid         int64 `json:"invalid"`                // not an event, not a message, or too long
	BadID           int64 `json:"bad_id"`                 // id does not match the content
	BadSig          int64 `json:"bad_sig"`                // signature does not verify
	Failed          int64 `json:"failed"`                 // the store refused it (see errors)
}

func (c *Counts) add(o *Counts) {
	c.Lines += o.Lines
	c.Blank += o.Blank
	c.Messages += o.Messages
	c.Events += o.Events
	c.Stored += o.Stored
	c.Duplicate += o.Duplicate
	c.Superseded += o.Superseded
	c.Deleted += o.Deleted
	c.Removed += o.Removed
	c.Ephemeral += o.Ephemeral
	c.Expired += o.Expired
	c.VanishElsewhere += o.VanishElsewhere
	c.Invalid += o.Invalid
	c.BadID += o.BadID
	c.BadSig += o.BadSig
	c.Failed += o.Failed
}

// LineError is one refused line.
type LineError struct {
	Line int64  `json:"line"`         // 1-based line number
	ID   string `json:"id,omitempty"` // the event's id in hex, when the line held one
	Err  string `json:"error"`
}

// Result is what Run did. It belongs to the caller once Run returns.
type Result struct {
	Counts
	Errors       []LineError `json:"errors,omitempty"` // the first Options.MaxErrors refused lines, by line number
	Bytes        int64       `json:"bytes"`            // input bytes (uncompressed)
	Seconds      float64     `json:"seconds"`
	EventsPerSec float64     `json:"events_per_sec"` // Events / Seconds
	Verifier     string      `json:"verifier"`       // "none" with NoVerify
	Interrupted  bool        `json:"interrupted,omitempty"`
}
