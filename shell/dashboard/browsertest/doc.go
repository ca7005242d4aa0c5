// Package browsertest tests the dashboard (package shell/dashboard) in a
// real browser: a headless Chromium driven from Go with chromedp, on the
// demo application's data in a fresh SQLite store. It is a Go module of its
// own, so that chromedp is not a dependency of the library.
//
//	cd shell/dashboard/browsertest && go test ./...
//
// The tests look for Chromium at $CHROMIUM, /usr/bin/chromium (Debian's
// chromium package) or on the PATH. Without one they skip, except under
// CI=true, where they fail. SOURCED_SCREENSHOTS=dir keeps every screenshot
// the tests take and check; SOURCED_README_SCREENSHOT=file writes the
// README's.
package browsertest
