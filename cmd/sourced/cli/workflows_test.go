package cli

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sourced-go/sourced/codec"
	"github.com/sourced-go/sourced/shell"
	"github.com/sourced-go/sourced/shell/sqlitestore"
	"github.com/sourced-go/sourced/shell/workflow"
)

// workflowFixture installs a store with one complete, one failed and one
// waiting run of the workflow "signup".
func workflowFixture(t *testing.T) string {
	t.Helper()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "wf.db")
	s, err := sqlitestore.Install(ctx, path, sqlitestore.Options{Registry: codec.NewRegistry()})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	wf := workflow.Define("signup", func(w *workflow.Workflow, email string) (string, error) {
		id, err := workflow.Step(w, "create_account", func(context.Context) (string, error) {
			if email == "bad" {
				return "", errors.New("invalid e-mail")
			}
			return "acct-" + email, nil
		})
		if err != nil {
			return "", err
		}
		if email == "slow" {
			if _, err := workflow.Receive[bool](w, "confirmed", time.Hour); err != nil {
				return "", err
			}
		}
		return id, nil
	})
	cfg := shell.DefaultConfig()
	cfg.CatchUpInterval = 20 * time.Millisecond
	rt, err := shell.NewRuntime(s, cfg, wf)
	if err != nil {
		t.Fatal(err)
	}
	if err := rt.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer rt.Stop(ctx)
	wctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	for _, email := range []string{"ada", "bad"} {
		run, err := workflow.Start(ctx, s, wf, email, workflow.WithID("run-"+email))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := run.Wait(wctx); err != nil && email != "bad" {
			t.Fatal(err)
		}
	}
	if _, err := workflow.Start(ctx, s, wf, "slow", workflow.WithID("run-slow")); err != nil {
		t.Fatal(err)
	}
	for {
		info, err := workflow.Load(wctx, s, wf, "run-slow")
		if err != nil {
			t.Fatal(err)
		}
		if len(info.Steps) == 2 {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	return path
}

func TestWorkflowCommands(t *testing.T) {
	db := workflowFixture(t)
	out, errOut, code := cli(t, "-db", db, "workflows")
	if code != 0 {
		t.Fatalf("workflows: %d %s", code, errOut)
	}
	for _, want := range []string{"signup    1        1         1       0          3", "run-slow", "receive confirmed (waiting)", "run-bad", "failed", "invalid e-mail", "run-ada", "complete"} {
		if !strings.Contains(out, want) {
			t.Fatalf("workflows output lacks %q:\n%s", want, out)
		}
	}
	out, _, code = cli(t, "-db", db, "-json", "workflows", "-status", "failed")
	var listed struct {
		Workflows []struct {
			Total int `json:"total"`
		} `json:"workflows"`
		Runs []struct {
			ID     string `json:"id"`
			Status string `json:"status"`
			Error  string `json:"error"`
		} `json:"runs"`
	}
	if err := json.Unmarshal([]byte(out), &listed); err != nil || code != 0 {
		t.Fatalf("workflows -json: %v %d\n%s", err, code, out)
	}
	if len(listed.Runs) != 1 || listed.Runs[0].ID != "run-bad" || listed.Workflows[0].Total != 3 {
		t.Fatalf("listed %+v", listed)
	}
	out, errOut, code = cli(t, "-db", db, "workflow", "run-ada")
	if code != 0 {
		t.Fatalf("workflow: %d %s", code, errOut)
	}
	for _, want := range []string{"status    complete", `output    "acct-ada"`, `step  create_account  complete  1         "acct-ada"`} {
		if !strings.Contains(out, want) {
			t.Fatalf("workflow output lacks %q:\n%s", want, out)
		}
	}
	if _, errOut, code = cli(t, "-db", db, "workflow", "nope"); code != 1 || !strings.Contains(errOut, `no run "nope"`) {
		t.Fatalf("unknown run: %d %s", code, errOut)
	}
	if _, errOut, code = cli(t, "-db", db, "workflows", "-status", "odd"); code != 2 || !strings.Contains(errOut, "want running, complete") {
		t.Fatalf("bad status: %d %s", code, errOut)
	}
}
