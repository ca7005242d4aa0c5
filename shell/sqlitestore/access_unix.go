//go:build unix

package sqlitestore

import "syscall"

// writable reports whether this process may write path (access(2) with
// W_OK: for root only a read-only mount says no).
func writable(path string) bool { return syscall.Access(path, 0x2) == nil }
