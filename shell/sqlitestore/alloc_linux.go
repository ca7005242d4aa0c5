//go:build linux

package sqlitestore

import (
	"sync"

	"modernc.org/libc"
)

var pinOnce sync.Once

// pinAllocator keeps one block of each small size class of the C heap that
// SQLite allocates from (modernc.org/libc's allocator, modernc.org/memory)
// alive for the life of the process.
//
// Why: that allocator carves each size class (16 B to 16 KiB) out of 64 KiB
// mmap'ed pages and unmaps a page as soon as its last block is freed. SQLite
// allocates a scratch buffer of about 8 to 16 KiB on every B-tree page
// split (balance_nonroot) and frees it right away, so without a live block
// in that class every split paid mmap, fresh-page faults and munmap: about
// 65 µs each here, measured as 45% of the CPU of batched appends and
// 0.6 munmap calls per appended message. With one pinned block per class
// the page stays mapped and the scratch buffer reuses a free slot. The cost
// is one 64 KiB mapping per class (11 of them, mostly never touched).
func pinAllocator() {
	pinOnce.Do(func() {
		tls := libc.NewTLS()
		defer tls.Close()
		const pageSize = 64 << 10
		for log := 4; log <= 14; log++ {
			// Fill the class's current page and start a second one, then
			// free all but the last block of each page: two pages stay
			// mapped with free slots for SQLite's transient buffers.
			n := pageSize>>log + 1
			blocks := make([]uintptr, 0, n)
			for range n {
				blocks = append(blocks, libc.Xmalloc(tls, libc.Tsize_t(1)<<log))
			}
			keep := map[uintptr]uintptr{} // page -> the block kept on it
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
