package server

// SetSimulateLateDeadline exposes simulateLateDeadline to the external
// test package.
func SetSimulateLateDeadline(v bool) { simulateLateDeadline = v }
