//go:build !unix

package sqlitestore

import "os"

// writable reports whether path looks writable: its mode has a write bit
// (off Unix there is no access(2)).
func writable(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.Mode().Perm()&0o222 != 0
}
