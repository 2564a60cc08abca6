package core

// zeroed is s with length n and every element zero, reusing s's array when
// it is large enough (the per-round buffers that Decide and placement keep
// in pools or in the free set).
func zeroed[T any](s []T, n int) []T {
	if cap(s) < n {
		return make([]T, n)
	}
	s = s[:n]
	clear(s)
	return s
}
