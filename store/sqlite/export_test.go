package sqlite

// BatchStats returns how many batches of several Puts s has committed,
// and how many Puts they held.
func BatchStats(s *Store) (batches, puts int64) { return s.puts.Stats() }

// Synchronous returns the synchronous setting of s's write connection
// (1 for NORMAL, 2 for FULL).
func Synchronous(s *Store) (n int, err error) {
	err = s.writer.QueryRow(`PRAGMA synchronous`).Scan(&n)
	return n, err
}
