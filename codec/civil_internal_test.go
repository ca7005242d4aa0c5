package codec

import (
	"math"
	"testing"
	"time"
)

// civilFast agrees with the reference algorithm and with package time.
func TestCivilFast(t *testing.T) {
	check := func(days int64) {
		y1, m1, d1 := civil(days)
		y2, m2, d2 := civilFast(days)
		if y1 != y2 || m1 != m2 || d1 != d2 {
			t.Fatalf("day %d: civil %d-%d-%d, civilFast %d-%d-%d", days, y1, m1, d1, y2, m2, d2)
		}
	}
	for d := int64(-1_000_000); d <= 4_000_000; d++ { // years -768 to 12921
		check(d)
	}
	for _, d := range []int64{-civilShift - 1, -civilShift, -civilShift + 1, math.MaxInt64 / 86400 / 2, math.MinInt64 / 86400 / 2} {
		check(d)
	}
	for d := int64(-800_000); d <= 3_000_000; d += 997 {
		tm := time.Unix(d*86400, 0).UTC()
		y, m, dd := civilFast(d)
		if int64(tm.Year()) != y || int(tm.Month()) != m || tm.Day() != dd {
			t.Fatalf("day %d: time says %v, civilFast %d-%d-%d", d, tm, y, m, dd)
		}
	}
}
