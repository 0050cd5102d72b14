package relay

import "time"

// SetOKTraceLimit shortens OKTraceLimit for a test; the returned func
// restores it.
func SetOKTraceLimit(d time.Duration) (restore func()) {
	old := okTraceLimit
	okTraceLimit = d
	return func() { okTraceLimit = old }
}

// OKTraceOn reports whether an OK trace runs.
func (r *Relay) OKTraceOn() bool { return r.okTrace.on.Load() }
