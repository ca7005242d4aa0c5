package peers_test

import (
	"os"
	"sync"

	"modernc.org/libc"
)

var pinOnce sync.Once

// pinCHeap gives River's connections what sqlitestore gives its own (see
// pinAllocator in shell/sqlitestore/alloc_linux.go): one block of each
// small size class of modernc.org/libc's C heap kept alive for the life of
// the process, so SQLite's transient buffers do not mmap and munmap a
// 64 KiB page each time. It is process-wide: once a Sourced store was
// opened in this test binary, River has it too, so the River drain pins it
// itself for a result that does not depend on which benchmark ran first.
// PEERS_NO_PIN=1 turns it off (then River runs first: see README).
func pinCHeap() {
	if os.Getenv("PEERS_NO_PIN") != "" {
		return
	}
	pinOnce.Do(func() {
		tls := libc.NewTLS()
		defer tls.Close()
		const pageSize = 64 << 10
		for log := 4; log <= 14; log++ {
			n := pageSize>>log + 1
			blocks := make([]uintptr, 0, n)
			for range n {
				blocks = append(blocks, libc.Xmalloc(tls, libc.Tsize_t(1)<<log))
			}
			keep := map[uintptr]uintptr{}
			for _, b := range blocks {
				keep[b&^(pageSize-1)] = b
			}
			for _, b := range blocks {
				if b != 0 && keep[b&^(pageSize-1)] != b {
					libc.Xfree(tls, b)
				}
			}
		}
	})
}
