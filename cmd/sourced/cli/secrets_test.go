package cli

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/sourced-go/sourced/core"
	"github.com/sourced-go/sourced/shell"
)

// Every form a PostgreSQL connection can be given in: redact hides the
// password of each, and the tool prints none of them, whatever fails.
var secretForms = []struct{ db, secret string }{
	{"postgres://joe:s3cretpw@db.example/app", "s3cretpw"},
	{"postgresql://joe:s3cretpw@h1,h2:5433/app?sslmode=require", "s3cretpw"},
	{"postgres://joe:p@ss@word9@db.example/app", "p@ss@word9"},
	{"postgres://joe:p%40ss%2Fw0rd@db.example/app", "p%40ss%2Fw0rd"},
	{"postgres://joe:se/cr?et99@db.example/app", "se/cr?et99"},
	{"postgres://joe@db.example/app?password=s3cretpw", "s3cretpw"},
	{"postgres://db.example/app?sslmode=disable&password=s3cretpw&user=joe", "s3cretpw"},
	{"postgres://db.example/app?PASSWORD=s3cretpw", "s3cretpw"},
	{"postgres://db.example/app?sslpassword=keypass1&sslkey=/k", "keypass1"},
	{"host=/tmp user=joe password=s3cretpw dbname=app", "s3cretpw"},
	{"host=/tmp user=joe password = s3cretpw dbname=app", "s3cretpw"},
	{"host=/tmp user=joe password='s3 cret pw' dbname=app", "s3 cret pw"},
	{"password=s3cretpw host=/tmp", "s3cretpw"},
	{"host=/tmp sslpassword=keypass1", "keypass1"},
}

func TestRedactHidesEveryPasswordForm(t *testing.T) {
	for _, f := range secretForms {
		got := redact(f.db)
		if strings.Contains(got, f.secret) || strings.Contains(got, "s3cret") || strings.Contains(got, "word9") {
			t.Errorf("redact(%q) = %q: shows the password", f.db, got)
		}
		if !strings.Contains(got, "xxxxx") {
			t.Errorf("redact(%q) = %q: no mark where the password was", f.db, got)
		}
	}
	if got := redact("postgres://joe@db.example/app"); got != "postgres://joe@db.example/app" {
		t.Errorf("a URL without a password: %q", got)
	}
	if got := redact("/var/lib/app/events.db"); got != "/var/lib/app/events.db" {
		t.Errorf("a file: %q", got)
	}
}

// Through the tool: a PostgreSQL URL given to a SQLite-only binary, and a
// key=value string the SQLite driver takes for a file name.
func TestTheToolPrintsNoPassword(t *testing.T) {
	for _, f := range secretForms {
		for _, args := range [][]string{{"migrate", "status"}, {"status"}, {"serve"}, {"migrate"}} {
			var out, errOut bytes.Buffer
			Run(context.Background(), append([]string{"-db", f.db}, args...), &out, &errOut, SQLite())
			all := out.String() + errOut.String()
			if strings.Contains(all, f.secret) || strings.Contains(all, "s3cret") {
				t.Errorf("sourced -db %q %s printed the password:\n%s", f.db, strings.Join(args, " "), all)
			}
		}
	}
}

// Stored data holding terminal escape sequences is printed with its
// control characters escaped, in text output and in error messages.
func TestTextOutputEscapesControlCharacters(t *testing.T) {
	path, s := emptyStore(t)
	evil := "Alg\x1b]0;pwned\x07\x1b[2J\rebra\u009b31m"
	if _, err := s.Append(context.Background(), core.Messages(CourseCreated{CourseID: "c\x1b[8m1", CourseName: evil}), shell.AppendOptions{}); err != nil {
		t.Fatal(err)
	}
	s.Close()
	for _, args := range [][]string{{"log"}, {"-json", "log"}, {"log", "-type", "courses.created\x1b[31m"}, {"trace", "x\x1b[31m"}} {
		var out, errOut bytes.Buffer
		Run(context.Background(), append([]string{"-db", path}, args...), &out, &errOut, SQLite())
		all := out.String() + errOut.String()
		if strings.ContainsAny(all, "\x1b\x07\r\u009b") {
			t.Errorf("sourced %q printed a raw control character:\n%q", args, all)
		}
		if (len(args) == 1 || args[0] == "-json") && !strings.Contains(all, `\x1b`) && !strings.Contains(all, `\u001b`) {
			t.Errorf("sourced %q: the escape is not shown escaped:\n%q", args, all)
		}
	}
	var b bytes.Buffer
	if n, err := (escWriter{&b}).Write([]byte("ok\t\n\xff\x9b")); n != 6 || err != nil || b.String() != "ok\t\n\\xff\\x9b" {
		t.Errorf("escWriter: %d %v %q", n, err, b.String())
	}
}
