package postgres

// BatchStats returns how many batches of several operations s has sent,
// and how many operations they held.
func BatchStats(s *Store) (batches, ops int64) {
	return s.ops.Stats()
}
