// Package proctest is the harness of the stores' multi-process tests: the
// test binary re-executed as worker processes, each running a runtime on a
// shared store until SIGTERM or SIGKILL, while the test appends work and
// checks that every message is handled exactly once across crashes,
// restarts and graceful stops.
//
// It holds what those tests share whatever the store: starting, stopping
// and killing a worker process (Start, Worker), a worker process's body
// (Child, Serve), and the jobs domain the crash tests drive (Job, JobDone,
// JobWorker, AppendJobs, WaitDone). Opening the store stays with each test,
// which passes the store's location (a file, a table prefix) to Start and
// gets it back in the child from Child.
//
// A test of a store uses it from its TestMain:
//
//	func TestMain(m *testing.M) {
//		if where, ok := proctest.Child(); ok {
//			os.Exit(runWorker(where)) // opens the store at where, then proctest.Serve
//		}
//		os.Exit(m.Run())
//	}
//
// It is exported so that a store in another module (shell/pgstore) or of
// another author can run the same crash tests; it is test support, not
// application API, and may change with the suite.
package proctest
