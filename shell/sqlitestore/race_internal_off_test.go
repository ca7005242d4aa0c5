//go:build !race

package sqlitestore

// underRace is set when the tests run under the race detector (see
// raceEnabled in the external tests): the longest tests then do less work.
const underRace = false
