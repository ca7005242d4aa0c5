//go:build !linux

package bench

import "time"

// sleepUntil sleeps until t.
func sleepUntil(t time.Time) {
	if d := time.Until(t); d > 0 {
		time.Sleep(d)
	}
}
