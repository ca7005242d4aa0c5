package pgtest

import (
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
)

// Server is a PostgreSQL server of one test's own, for the tests that stop
// or restart it (which the shared server of URL must never be).
type Server struct {
	// URL is the server's URL (a Unix socket in the server's directory).
	URL string

	dir, bin string
	as       []string // the command prefix running a binary as the data's owner
}

// EnvBin is the environment variable naming the directory of PostgreSQL's
// binaries (initdb, pg_ctl) for NewServer; by default the newest
// /usr/lib/postgresql/*/bin.
const EnvBin = "SOURCED_TEST_PGBIN"

// NewServer initialises and starts a server of the test's own (fsync off:
// a test server), stopped when the test ends. Without PostgreSQL's
// binaries the test is skipped, or fails under CI (CI=true). PostgreSQL
// refuses to run as root: run as root, the server runs as the user
// "postgres" (through runuser).
func NewServer(t testing.TB) *Server {
	t.Helper()
	bin := os.Getenv(EnvBin)
	if bin == "" {
		dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
		slices.SortFunc(dirs, func(a, b string) int { return version(a) - version(b) })
		if len(dirs) > 0 {
			bin = dirs[len(dirs)-1]
		}
	}
	if _, err := os.Stat(filepath.Join(bin, "initdb")); bin == "" || err != nil {
		const how = "no PostgreSQL binaries (initdb, pg_ctl) found: install postgresql or set " + EnvBin
		if os.Getenv("CI") == "true" {
			t.Fatal(how)
		}
		t.Skip(how)
	}
	dir, err := os.MkdirTemp("", "sourced-pg-")
	if err != nil {
		t.Fatal(err)
	}
	s := &Server{dir: dir, bin: bin}
	t.Cleanup(func() {
		s.ctl("stop", "-m", "immediate")
		os.RemoveAll(dir)
	})
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			t.Fatalf("running as root, the server needs the user postgres: %v", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		if err := os.Chown(dir, uid, gid); err != nil {
			t.Fatal(err)
		}
		s.as = []string{"runuser", "-u", "postgres", "--"}
	}
	if out, err := s.run(filepath.Join(bin, "initdb"), "-D", s.data(), "-U", "postgres", "-A", "trust", "-E", "UTF8", "--no-sync"); err != nil {
		t.Fatalf("initdb: %v\n%s", err, out)
	}
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	s.URL = "postgres://postgres@/postgres?host=" + dir
	return s
}

// version orders /usr/lib/postgresql/<version>/bin by version.
func version(dir string) int {
	v, _ := strconv.Atoi(filepath.Base(filepath.Dir(dir)))
	return v
}

func (s *Server) data() string { return filepath.Join(s.dir, "data") }

func (s *Server) run(name string, args ...string) ([]byte, error) {
	cmd := append(slices.Clone(s.as), name)
	return exec.Command(cmd[0], append(cmd[1:], args...)...).CombinedOutput()
}

func (s *Server) ctl(args ...string) error {
	args = append([]string{"-D", s.data(), "-w", "-t", "60"}, args...)
	if out, err := s.run(filepath.Join(s.bin, "pg_ctl"), args...); err != nil {
		return fmt.Errorf("pg_ctl %v: %w\n%s", args, err, out)
	}
	return nil
}

// opts are the server's settings: a Unix socket in its directory, no TCP,
// no fsync (a test server).
func (s *Server) opts() string {
	return "-k " + s.dir + " -c listen_addresses= -c fsync=off -c synchronous_commit=off -c max_connections=100"
}

// Start starts the server (NewServer did once).
func (s *Server) Start() error {
	return s.ctl("-l", filepath.Join(s.dir, "server.log"), "-o", s.opts(), "start")
}

// Restart restarts the server in fast mode (pg_ctl restart -m fast): the
// sessions are ended, their open transactions rolled back.
func (s *Server) Restart() error {
	return s.ctl("-l", filepath.Join(s.dir, "server.log"), "-o", s.opts(), "-m", "fast", "restart")
}
