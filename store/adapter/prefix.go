package adapter

// PrefixEnd returns the smallest string greater than every string that
// starts with prefix, and false when there is none (prefix is empty or all
// 0xff bytes). Adapters list a prefix as the range [prefix, PrefixEnd),
// which, unlike a LIKE pattern, treats every character literally.
func PrefixEnd(prefix string) (string, bool) {
	for i := len(prefix) - 1; i >= 0; i-- {
		if prefix[i] != 0xff {
			b := []byte(prefix[:i+1])
			b[i]++
			return string(b), true
		}
	}
	return "", false
}
