//go:build !linux

package sqlitestore

// pinAllocator is a no-op off Linux (see alloc_linux.go).
func pinAllocator() {}
