package sqlite

// BatchStats returns how many batches of several Puts s has committed,
// and how many Puts they held.
func BatchStats(s *Store) (batches, puts int64) { return s.puts.Stats() }
