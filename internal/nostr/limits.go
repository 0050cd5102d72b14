package nostr

import "strconv"

// Limits bounds what the parser will accept, so that an oversized message is
// refused while it is being read rather than after it has been allocated.
// A zero field means "no limit".
type Limits struct {
	MaxFilters      int // filters in one REQ or COUNT
	MaxFilterValues int // elements of any one array inside a filter
	MaxTags         int // tags in one event
	MaxTagElems     int // elements of one tag
	MaxSubIDLen     int // bytes of a subscription id
	MaxContentBytes int // bytes of an event's content after unescaping
}

// Bound names the bound an input exceeded: one per Limits field, and one
// per kind of input (event, filter, message) for the parser's own ceiling
// on input size, 2 GiB less a byte (offsets are kept in 32 bits). The zero
// value, BoundNone, is the Bound of an error that is not about a bound.
type Bound uint8

// Bounds.
const (
	BoundNone         Bound = iota
	BoundSubIDLen           // Limits.MaxSubIDLen: bytes of a subscription id
	BoundFilters            // Limits.MaxFilters: filters in one REQ or COUNT
	BoundFilterValues       // Limits.MaxFilterValues: elements of one array in a filter
	BoundTags               // Limits.MaxTags: tags in one event
	BoundTagElems           // Limits.MaxTagElems: elements of one tag
	BoundContentBytes       // Limits.MaxContentBytes: bytes of an event's content, unescaped
	BoundEventBytes         // the input of ParseEvent is over the size ceiling
	BoundFilterBytes        // the input of ParseFilter is over the size ceiling
	BoundMessageBytes       // the input of ParseClientMessage or ParseRelayMessage is over the size ceiling
	numBounds
)

// boundNames are the Bounds' names: their Limits field, or what was too
// large.
var boundNames = [numBounds]string{
	BoundNone: "none", BoundSubIDLen: "MaxSubIDLen", BoundFilters: "MaxFilters",
	BoundFilterValues: "MaxFilterValues", BoundTags: "MaxTags", BoundTagElems: "MaxTagElems",
	BoundContentBytes: "MaxContentBytes", BoundEventBytes: "event bytes",
	BoundFilterBytes: "filter bytes", BoundMessageBytes: "message bytes",
}

// String returns the Bound's Limits field ("MaxTags"), or what was too large
// for the size ceilings ("message bytes").
func (b Bound) String() string {
	if b < numBounds {
		return boundNames[b]
	}
	return "bound(" + strconv.Itoa(int(b)) + ")"
}

// Bounds returns every Bound but BoundNone, in order: what a caller that
// maps each Bound to something (a counter) checks itself against.
func Bounds() []Bound {
	out := make([]Bound, 0, numBounds-1)
	for b := BoundNone + 1; b < numBounds; b++ {
		out = append(out, b)
	}
	return out
}
