package browsertest

import (
	"bytes"
	"context"
	"image"
	"image/png"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"

	"github.com/sourced-go/sourced/core"
	"github.com/sourced-go/sourced/shell"
	"github.com/sourced-go/sourced/shell/dashboard"
	"github.com/sourced-go/sourced/shell/dashboard/internal/demo"
	"github.com/sourced-go/sourced/shell/sqlitestore"
)

// chromium finds the browser: $CHROMIUM, else Debian's /usr/bin/chromium
// or one on the PATH. Under CI=true a missing browser fails the test (CI
// installs Debian's chromium package); elsewhere it skips with a message.
func chromium(t *testing.T) string {
	t.Helper()
	for _, p := range []string{os.Getenv("CHROMIUM"), "/usr/bin/chromium"} {
		if p == "" {
			continue
		}
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("no Chromium found (install Debian's chromium package, or set CHROMIUM to the browser's path): the browser tests must run under CI")
	}
	t.Skip("no Chromium found: install it (apt-get install chromium) or set CHROMIUM to run the dashboard's browser tests")
	return ""
}

type browser struct {
	t     *testing.T
	ctx   context.Context
	store shell.Store
	url   string
}

// newBrowser seeds the demo application in a fresh SQLite store, serves
// its dashboard and opens a headless Chromium on it.
func newBrowser(t *testing.T, width, height int64, refresh ...time.Duration) *browser {
	t.Helper()
	return newBrowserWith(t, width, height, func(o *dashboard.Options) {
		if len(refresh) > 0 {
			o.Refresh = refresh[0]
		}
	})
}

// newBrowserWith is newBrowser with the dashboard's options set by configure
// (after the defaults: the demo's reactors and router, no timed refresh).
func newBrowserWith(t *testing.T, width, height int64, configure func(*dashboard.Options)) *browser {
	t.Helper()
	exe := chromium(t)
	app := demo.New()
	store, err := sqlitestore.Install(context.Background(), filepath.Join(t.TempDir(), "browser.db"), sqlitestore.Options{Registry: app.Registry})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = store.Close() })
	router, err := app.Seed(context.Background(), store)
	if err != nil {
		t.Fatal(err)
	}
	o := dashboard.Options{Reactors: app.Reactors(), Router: router, Refresh: -1} // by default pages refresh on appends only: a timed refresh would replace nodes a test is about to click
	configure(&o)
	dash, err := dashboard.New(store, o)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(dash)
	t.Cleanup(srv.Close)

	// Chromium's profile: a directory of its own, removed after the
	// browser is stopped (this cleanup runs after the one below), again
	// for a while, since helper processes may write into it a moment
	// after the browser exits (t.TempDir would fail the test then).
	profile, err := os.MkdirTemp("", "sourced-chromium-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for range 20 {
			if os.RemoveAll(profile) == nil {
				return
			}
			time.Sleep(100 * time.Millisecond)
		}
	})
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(exe),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.UserDataDir(profile),
		chromedp.WindowSize(int(width), int(height)),
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelCtx := chromedp.NewContext(actx)
	ctx, cancelTimeout := context.WithTimeout(ctx, 90*time.Second)
	t.Cleanup(func() { cancelTimeout(); cancelCtx(); cancelAlloc() })
	// Accept every confirmation dialog, as an operator clicking OK.
	chromedp.ListenTarget(ctx, func(ev any) {
		if _, ok := ev.(*page.EventJavascriptDialogOpening); ok {
			go func() { _ = chromedp.Run(ctx, page.HandleJavaScriptDialog(true)) }()
		}
	})
	if err := chromedp.Run(ctx, chromedp.EmulateViewport(width, height)); err != nil {
		t.Fatalf("starting Chromium %s: %v", exe, err)
	}
	return &browser{t: t, ctx: ctx, store: store, url: srv.URL}
}

func (b *browser) run(actions ...chromedp.Action) {
	b.t.Helper()
	if err := chromedp.Run(b.ctx, actions...); err != nil {
		b.t.Fatal(err)
	}
}

func (b *browser) count(sel string) int {
	b.t.Helper()
	var n int
	b.run(chromedp.Evaluate(`document.querySelectorAll(`+jsString(sel)+`).length`, &n))
	return n
}

func jsString(s string) string {
	return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(s) + `"`
}

// screenshot captures the page and checks it is a PNG of the viewport's
// width with something drawn on it (not a blank page).
func (b *browser) screenshot(name string, full bool) []byte {
	b.t.Helper()
	var buf []byte
	if full {
		b.run(chromedp.FullScreenshot(&buf, 100))
	} else {
		b.run(chromedp.CaptureScreenshot(&buf))
	}
	img, err := png.Decode(bytes.NewReader(buf))
	if err != nil {
		b.t.Fatalf("screenshot %s is not a PNG: %v", name, err)
	}
	if img.Bounds().Dx() < 100 || img.Bounds().Dy() < 100 {
		b.t.Fatalf("screenshot %s is %v", name, img.Bounds())
	}
	if colors := distinctColors(img, 64); colors < 8 {
		b.t.Fatalf("screenshot %s looks blank: %d distinct colours", name, colors)
	}
	if dir := os.Getenv("SOURCED_SCREENSHOTS"); dir != "" {
		_ = os.WriteFile(filepath.Join(dir, name+".png"), buf, 0o644)
	}
	return buf
}

// distinctColors counts the colours of a sample of img's pixels, up to
// limit.
func distinctColors(img image.Image, limit int) int {
	seen := map[[3]uint32]bool{}
	r := img.Bounds()
	for y := r.Min.Y; y < r.Max.Y; y += 7 {
		for x := r.Min.X; x < r.Max.X; x += 7 {
			c0, c1, c2, _ := img.At(x, y).RGBA()
			seen[[3]uint32{c0 >> 8, c1 >> 8, c2 >> 8}] = true
			if len(seen) >= limit {
				return len(seen)
			}
		}
	}
	return len(seen)
}

func TestGroupsPageRendersWithData(t *testing.T) {
	b := newBrowser(t, 1280, 900)
	b.run(chromedp.Navigate(b.url+"/"), chromedp.WaitVisible(`tr.group[data-group="courses.catalog"]`, chromedp.ByQuery))
	if n := b.count(`tr.group`); n != 8 {
		t.Errorf("%d group rows, want the demo's 8", n)
	}
	if n := b.count(`tr.group[data-status="retrying"] .failure strong`); n != 1 {
		t.Errorf("the failing group's error is not shown (%d)", n)
	}
	var failure string
	b.run(chromedp.Text(`tr.group[data-group="courses.search_index"] td.failure`, &failure, chromedp.ByQuery))
	if !strings.Contains(failure, "search service unreachable") {
		t.Errorf("failure cell %q", failure)
	}
	b.screenshot("groups", false)
}

func TestLogFiltersInTheBrowser(t *testing.T) {
	b := newBrowser(t, 1280, 900)
	b.run(chromedp.Navigate(b.url+"/log"), chromedp.WaitVisible(`#log-filter`, chromedp.ByQuery))
	all := b.count(`tr.message`)
	var marked bool
	b.run(
		// Mark the unfiltered page, which shows enrolments too, so that the
		// wait below is for the filtered page, not an element the old page
		// already has.
		chromedp.Evaluate(`document.body.dataset.unfiltered = "1"; true`, &marked),
		chromedp.SendKeys(`#filter-type`, "courses.student_enrolled", chromedp.ByQuery),
		chromedp.SendKeys(`#filter-where`, "course_id=algebra", chromedp.ByQuery),
		chromedp.Submit(`#filter-type`, chromedp.ByQuery),
		chromedp.WaitNotPresent(`body[data-unfiltered]`, chromedp.ByQuery),
		chromedp.WaitVisible(`tr.message[data-type="courses.student_enrolled"]`, chromedp.ByQuery),
	)
	var loc string
	b.run(chromedp.Location(&loc))
	if !strings.Contains(loc, "type=courses.student_enrolled") {
		t.Errorf("the filter form went to %s", loc)
	}
	if n, other := b.count(`tr.message`), b.count(`tr.message:not([data-type="courses.student_enrolled"])`); n != 2 || other != 0 || all <= n {
		t.Errorf("filtered: %d rows (%d of other types), unfiltered %d", n, other, all)
	}
	// Open a message and find its trace.
	b.run(chromedp.Click(`tr.message a`, chromedp.ByQuery), chromedp.WaitVisible(`ul.trace`, chromedp.ByQuery))
	if n := b.count(`ul.trace li.trace-node`); n != 4 {
		t.Errorf("trace of an enrolment has %d nodes, want 4 (command, event, welcome, welcome sent)", n)
	}
	b.screenshot("message", true)
}

func TestOperatorStopsAGroup(t *testing.T) {
	b := newBrowser(t, 1280, 900)
	row := `tr.group[data-group="courses.catalog"]`
	b.run(
		chromedp.Navigate(b.url+"/"),
		chromedp.WaitVisible(row+`[data-status="active"]`, chromedp.ByQuery),
		chromedp.Click(row+` button.action-stop`, chromedp.ByQuery),
		chromedp.WaitVisible(row+`[data-status="stopped"]`, chromedp.ByQuery),
		chromedp.WaitVisible(`p.flash`, chromedp.ByQuery),
	)
	g, err := b.store.Group(context.Background(), "courses.catalog")
	if err != nil || g.Status != shell.StatusStopped {
		t.Fatalf("after clicking stop: %v %v", g.Status, err)
	}
	var disabled bool
	b.run(chromedp.Evaluate(`document.querySelector(`+jsString(row+` button.action-stop`)+`).disabled`, &disabled))
	if !disabled {
		t.Error("stop is still enabled on a stopped group")
	}
	b.screenshot("stopped", false)
	b.run(chromedp.Click(row+` button.action-start`, chromedp.ByQuery), chromedp.WaitVisible(row+`[data-status="active"]`, chromedp.ByQuery))
}

func TestLiveRefreshShowsNewMessages(t *testing.T) {
	b := newBrowser(t, 1280, 900)
	b.run(chromedp.Navigate(b.url+"/log"), chromedp.WaitVisible(`tr.message`, chromedp.ByQuery),
		chromedp.WaitReady(`body[data-live-state="open"]`, chromedp.ByQuery))
	before := b.count(`tr.message[data-type="courses.create_course"]`)
	if _, err := b.store.Append(context.Background(), core.Messages(demo.CreateCourse{CourseID: "chemistry", Title: "Chemistry"}), shell.AppendOptions{}); err != nil {
		t.Fatal(err)
	}
	b.run(chromedp.Poll(`document.querySelectorAll('tr.message[data-type="courses.create_course"]').length > `+strconv.Itoa(before), nil, chromedp.WithPollingTimeout(20*time.Second)))
}

// A change that appends nothing (an operator stopping a group from
// another process) shows on the next timed refresh.
func TestTimedRefreshShowsStatusChanges(t *testing.T) {
	b := newBrowser(t, 1280, 900, 300*time.Millisecond)
	row := `tr.group[data-group="courses.catalog"]`
	b.run(chromedp.Navigate(b.url+"/"), chromedp.WaitVisible(row+`[data-status="active"]`, chromedp.ByQuery))
	if err := b.store.StopGroup(context.Background(), "courses.catalog", "maintenance"); err != nil {
		t.Fatal(err)
	}
	b.run(chromedp.WaitVisible(row+`[data-status="stopped"]`, chromedp.ByQuery))
	var url string
	b.run(chromedp.Location(&url))
	if strings.Contains(url, "flash") {
		t.Errorf("the page navigated (%s) instead of refreshing in place", url)
	}
}

func TestTopologyAndMachinePages(t *testing.T) {
	b := newBrowser(t, 1400, 900)
	b.run(chromedp.Navigate(b.url+"/topology"), chromedp.WaitVisible(`svg.event-model`, chromedp.ByQuery))
	if n := b.count(`svg.event-model g.em-node`); n < 10 {
		t.Errorf("%d nodes on the board", n)
	}
	for _, sel := range []string{`g.em-command`, `g.em-event`, `g.em-automation`, `g.em-readmodel`, `path.em-edge`} {
		if b.count(`svg.event-model `+sel) == 0 {
			t.Errorf("no %s on the board", sel)
		}
	}
	b.screenshot("topology", false)
	b.run(chromedp.Navigate(b.url+"/machines/courses.lifecycle?partition=course_id:algebra"), chromedp.WaitVisible(`.chart`, chromedp.ByQuery))
	if n := b.count(`.chart .state.active[data-path="open"]`); n != 1 {
		t.Errorf("the algebra course's state open is not highlighted (%d)", n)
	}
	if n := b.count(`.chart .state.active`); n != 1 {
		t.Errorf("%d states highlighted, want 1", n)
	}
	b.screenshot("machine", false)
	b.run(chromedp.Navigate(b.url+"/workflows"), chromedp.WaitVisible(`section.workflow`, chromedp.ByQuery))
	if n := b.count(`tr.run[data-status="complete"]`); n != 1 {
		t.Errorf("%d complete runs, want 1", n)
	}
}

func TestPhoneLayout(t *testing.T) {
	b := newBrowser(t, 390, 844)
	b.run(chromedp.Navigate(b.url+"/"), chromedp.WaitVisible(`tr.group`, chromedp.ByQuery))
	var headerHidden bool
	var overflow int
	b.run(
		chromedp.Evaluate(`getComputedStyle(document.querySelector("table thead")).display === "none"`, &headerHidden),
		chromedp.Evaluate(`document.documentElement.scrollWidth - window.innerWidth`, &overflow),
	)
	if !headerHidden {
		t.Error("the table header is shown on a phone: rows are not folded into cards")
	}
	if overflow > 2 {
		t.Errorf("the page is %d px wider than the phone's screen", overflow)
	}
	b.screenshot("phone", false)
}

// TestREADMEScreenshot writes the README's screenshot when asked
// (SOURCED_README_SCREENSHOT=path): the groups page at 1100x640.
func TestREADMEScreenshot(t *testing.T) {
	out := os.Getenv("SOURCED_README_SCREENSHOT")
	if out == "" {
		t.Skip("set SOURCED_README_SCREENSHOT=docs/dashboard.png to write the README's screenshot")
	}
	b := newBrowser(t, 1100, 640)
	b.run(chromedp.Navigate(b.url+"/"), chromedp.WaitVisible(`tr.group`, chromedp.ByQuery))
	if err := os.WriteFile(out, b.screenshot("readme", false), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestOperatorRetriesAParkedPartition(t *testing.T) {
	b := newBrowser(t, 1280, 900)
	row := `tr.parked-partition[data-group="courses.welcomes"][data-partition="student_id:grace"]`
	b.run(
		chromedp.Navigate(b.url+"/partitions"),
		chromedp.WaitVisible(row, chromedp.ByQuery),
		chromedp.WaitVisible(`tr.worker[data-worker="demo-worker-1"]`, chromedp.ByQuery),
		chromedp.Click(row+` button.action-retry`, chromedp.ByQuery),
		chromedp.WaitVisible(`p.flash`, chromedp.ByQuery),
	)
	// Retried (not skipped): the failed message is pending again, and the
	// worker-less test leaves it unclaimed, so the partition is no longer
	// parked and shows its lag.
	if n := b.count(row); n != 0 {
		t.Errorf("the partition is still listed as parked (%d)", n)
	}
	ps, err := b.store.ParkedPartitions(context.Background(), "courses.welcomes")
	if err != nil || len(ps) != 0 {
		t.Fatalf("parked after retry: %v %v", ps, err)
	}
	b.screenshot("partitions", true)
}
