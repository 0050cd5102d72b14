package server

// StatsDoc returns the /stats document, for tests in package server_test
// that cannot fetch it over HTTP (a connection of theirs would need a
// PROXY header).
func (s *Server) StatsDoc() Stats { return s.statsDoc() }

// SlotTable returns the sizes of the slot table: connections holding a
// slot, client addresses counted, and PROXY connections recorded.
func (s *Server) SlotTable() (conns, addrs, proxied int) {
	s.slots.mu.Lock()
	defer s.slots.mu.Unlock()
	return len(s.slots.owners), len(s.slots.perIP), len(s.slots.proxied)
}
