package bench

import (
	"syscall"
	"time"
)

// sleepUntil blocks the calling goroutine's thread in nanosleep until t
// (the runtime's timers have a resolution of about a millisecond on
// Linux), again after each interruption (the runtime's preemption signal
// interrupts it).
func sleepUntil(t time.Time) {
	for {
		d := time.Until(t)
		if d <= 0 {
			return
		}
		ts := syscall.NsecToTimespec(int64(d))
		syscall.Nanosleep(&ts, nil)
	}
}
